/*
 * LD_PRELOAD shim for wrk's TLS client (wrk has no switches for these two things):
 *   BENCH_SNI=name     send this SNI instead of the URL's host (the URL is 127.0.0.1, the routes
 *                      and certificates are for a DNS name; nothing is added to /etc/hosts);
 *   BENCH_NO_RESUME=1  drop the cached session before each new connection, so every connection
 *                      is a full handshake (wrk otherwise resumes with the session it kept).
 * Only SSL_connect is wrapped, and it acts only before a handshake has started: the requests on
 * an established connection are untouched. Symbols resolve in wrk's own libssl at run time.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

typedef struct ssl_st SSL;
typedef struct ssl_session_st SSL_SESSION;
extern int SSL_set_session(SSL *, SSL_SESSION *);
extern int SSL_in_before(const SSL *);
extern long SSL_ctrl(SSL *, int, long, void *);

#define CTRL_SET_TLSEXT_HOSTNAME 55 /* SSL_CTRL_SET_TLSEXT_HOSTNAME */
#define NAMETYPE_HOST_NAME 0        /* TLSEXT_NAMETYPE_host_name */

int SSL_connect(SSL *s) {
    static int (*real)(SSL *);
    static const char *sni;
    static int no_resume = -1;
    if (!real) real = (int (*)(SSL *))dlsym(RTLD_NEXT, "SSL_connect");
    if (no_resume < 0) {
        const char *v = getenv("BENCH_NO_RESUME");
        no_resume = v && *v && *v != '0';
        sni = getenv("BENCH_SNI");
    }
    if (SSL_in_before(s)) {
        if (no_resume) SSL_set_session(s, NULL);
        if (sni && *sni) SSL_ctrl(s, CTRL_SET_TLSEXT_HOSTNAME, NAMETYPE_HOST_NAME, (void *)sni);
    }
    return real(s);
}
