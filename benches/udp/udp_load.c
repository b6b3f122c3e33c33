// The UDP benchmark's two ends (benches/udp/run.py builds this with gcc):
//
//   udp_load echo PORT                      answers every datagram to its sender, in batches
//   udp_load load PORT SECONDS FLOWS SIZE   FLOWS client sockets (one flow each through a proxy),
//                                           each with one SIZE-byte datagram in flight: on its
//                                           answer, the next is sent. Prints "round_trips lost".
//
// A datagram that gets no answer within 200 ms is counted lost and sent again, so a flow never
// stalls. Both loops are single-threaded; the harness pins them.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 64

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static int echo(int port) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = loopback(port);
    int big = 4 << 20;
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("bind");
        return 1;
    }
    static char bufs[BATCH][2048];
    struct mmsghdr msgs[BATCH];
    struct iovec iov[BATCH];
    struct sockaddr_in from[BATCH];
    for (;;) {
        memset(msgs, 0, sizeof msgs);
        for (int i = 0; i < BATCH; i++) {
            iov[i] = (struct iovec){bufs[i], sizeof bufs[i]};
            msgs[i].msg_hdr = (struct msghdr){.msg_name = &from[i], .msg_namelen = sizeof from[i], .msg_iov = &iov[i], .msg_iovlen = 1};
        }
        int n = recvmmsg(s, msgs, BATCH, MSG_WAITFORONE, NULL);
        if (n < 0) {
            if (errno == EINTR) continue;
            perror("recvmmsg");
            return 1;
        }
        for (int i = 0; i < n; i++) iov[i].iov_len = msgs[i].msg_len;
        sendmmsg(s, msgs, n, 0);
    }
}

static int load(int port, double seconds, int flows, int size) {
    int ep = epoll_create1(0);
    int *fds = calloc(flows, sizeof *fds);
    double *sent = calloc(flows, sizeof *sent);
    char *payload = calloc(1, size), buf[4096];
    struct sockaddr_in to = loopback(port);
    double start = now(), end = start + seconds;
    for (int i = 0; i < flows; i++) {
        fds[i] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
        if (connect(fds[i], (struct sockaddr *)&to, sizeof to) != 0) {
            perror("connect");
            return 1;
        }
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = i};
        epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e);
        send(fds[i], payload, size, 0);
        sent[i] = start;
    }
    long round_trips = 0, lost = 0;
    double checked = start;
    struct epoll_event events[BATCH];
    for (;;) {
        double t = now();
        if (t >= end) break;
        int n = epoll_wait(ep, events, BATCH, 50);
        t = now();
        for (int k = 0; k < n; k++) {
            int i = events[k].data.u32;
            while (recv(fds[i], buf, sizeof buf, 0) > 0) round_trips++;
            send(fds[i], payload, size, 0);
            sent[i] = t;
        }
        if (t - checked > 0.1) {
            for (int i = 0; i < flows; i++)
                if (t - sent[i] > 0.2) {
                    lost++;
                    send(fds[i], payload, size, 0);
                    sent[i] = t;
                }
            checked = t;
        }
    }
    printf("%ld %ld %.3f\n", round_trips, lost, now() - start);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "echo") == 0) return echo(atoi(argv[2]));
    if (argc == 6 && strcmp(argv[1], "load") == 0)
        return load(atoi(argv[2]), atof(argv[3]), atoi(argv[4]), atoi(argv[5]));
    fprintf(stderr, "usage: udp_load echo PORT | udp_load load PORT SECONDS FLOWS SIZE\n");
    return 2;
}
