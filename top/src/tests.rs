//! Unit tests: the model, the traffic arithmetic, the keys, the client's headers on the wire, and
//! the screen drawn on ratatui's `TestBackend`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use super::app::{App, Link, View};
use super::client::{AdminClient, ClientError, Token};
use super::model::{Generations, PinAnswer, PinState, Scrape};
use super::ui::{draw, Now};
use super::worker::{Command, Update};
use super::{admin_url, interval};

mod fleet;

const GENERATIONS: &str = r#"{"serving":3,"pinned":null,"newest":3,"history_size":10,"generations":[
 {"generation":3,"digest":"c3c3c3c3c3c3","compiled_at":"2026-01-02T03:04:05.000Z","applied_at":"2026-01-02T03:04:05.001Z",
  "published":true,"serving":true,"routes":3,"hosts":1,"certs":0,"summary":"1 route added",
  "changes":{"routes_added":1},"diagnostics":[{"object":{"kind":"Ingress","namespace":"shop","name":"web"},"severity":"error",
  "message":"backend svc missing"}]},
 {"generation":2,"digest":"b2b2b2b2b2b2","compiled_at":"2026-01-02T03:03:05.000Z","applied_at":"2026-01-02T03:03:05.001Z",
  "published":true,"serving":false,"routes":2,"hosts":1,"certs":0,"summary":"1 route added","changes":{},"diagnostics":[]},
 {"generation":1,"digest":"a1a1a1a1a1a1","compiled_at":"2026-01-02T03:02:05.000Z","applied_at":"2026-01-02T03:02:05.001Z",
  "published":true,"serving":false,"routes":1,"hosts":1,"certs":0,"summary":"1 route added, 1 host added","changes":{},
  "diagnostics":[],"a_field_from_a_newer_daemon":true}
]}"#;

fn generations() -> Generations {
    serde_json::from_str(GENERATIONS).unwrap()
}

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

fn metrics(ok2xx: u64, e5xx: u64, connect_errors: u64) -> String {
    format!(
        "# HELP ramjet_requests_total Requests answered, by status class.\n\
         # TYPE ramjet_requests_total counter\n\
         ramjet_requests_total{{class=\"1xx\"}} 0\n\
         ramjet_requests_total{{class=\"2xx\"}} {ok2xx}\n\
         ramjet_requests_total{{class=\"5xx\"}} {e5xx}\n\
         ramjet_upstream_errors_total{{kind=\"connect\"}} {connect_errors}\n\
         ramjet_upstream_errors_total{{kind=\"timeout\"}} 0\n\
         ramjet_connections_active 7\n\
         ramjet_publish_duration_seconds_bucket{{le=\"+Inf\"}} 3\n"
    )
}

/// An app that has seen one good poll, at `at`.
fn polled_app(at: Instant) -> App {
    let mut app = App::new("http://127.0.0.1:10254", Duration::from_secs(1), false, true);
    app.on_update(Update::Poll { at, generations: Ok(generations()), metrics: None });
    app
}

/// Draws `app` on a 110x34 test terminal and returns the screen as text, one line per row.
fn screen(app: &App, now: Now) -> String {
    render(|frame| draw(frame, app, now))
}

/// Runs `draw` on a 110x34 test terminal and returns the screen as text, one line per row.
fn render(draw: impl FnOnce(&mut ratatui::Frame)) -> String {
    let mut terminal = Terminal::new(TestBackend::new(110, 34)).unwrap();
    terminal.draw(draw).unwrap();
    let buffer = terminal.backend().buffer();
    let mut out = String::new();
    for y in 0..buffer.area.height {
        for x in 0..buffer.area.width {
            out.push_str(buffer[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

fn wall(rfc3339: &str) -> SystemTime {
    humantime::parse_rfc3339(rfc3339).unwrap()
}

#[test]
fn scrape_reads_the_series_it_shows_and_skips_the_rest() {
    let s = Scrape::parse(&metrics(90, 10, 4));
    assert_eq!(s.requests.get("2xx"), Some(&90.0));
    assert_eq!(s.requests_total(), 100.0);
    assert_eq!(s.upstream_errors.get("connect"), Some(&4.0));
    assert_eq!(s.upstream_errors_total(), 4.0);
    assert_eq!(s.connections_active, Some(7.0));
    assert_eq!(Scrape::parse("garbage\nramjet_requests_total{class=\"2xx\"} x\n"), Scrape::default());
}

#[test]
fn rates_come_from_counter_deltas_and_a_reset_gives_none() {
    let mut app = polled_app(Instant::now());
    let t0 = Instant::now();
    app.traffic.record(t0, Scrape::parse(&metrics(100, 0, 0)));
    assert!(app.traffic.rates.is_none(), "one scrape has no rate");
    app.traffic.record(t0 + Duration::from_secs(2), Scrape::parse(&metrics(140, 10, 2)));
    let r = app.traffic.rates.clone().unwrap();
    assert_eq!(r.requests_total, 25.0);
    assert_eq!(r.requests.get("2xx"), Some(&20.0));
    assert_eq!(r.requests.get("5xx"), Some(&5.0));
    assert_eq!(r.upstream_errors, 1.0);
    assert_eq!(app.traffic.history.iter().copied().collect::<Vec<_>>(), vec![25.0]);

    // The daemon restarted: counters went down. No rate for that interval, then counting resumes.
    app.traffic.record(t0 + Duration::from_secs(3), Scrape::parse(&metrics(5, 0, 0)));
    assert!(app.traffic.rates.is_none());
    app.traffic.record(t0 + Duration::from_secs(4), Scrape::parse(&metrics(15, 0, 0)));
    assert_eq!(app.traffic.rates.as_ref().unwrap().requests_total, 10.0);
    assert_eq!(app.traffic.history.len(), 2);
}

#[test]
fn selection_starts_on_serving_and_moves_with_arrows_and_jk() {
    let mut app = polled_app(Instant::now());
    assert_eq!(app.selected, Some(3));
    app.on_key(key('j'));
    assert_eq!(app.selected, Some(2));
    app.on_key(KeyEvent::new(KeyCode::Down, KeyModifiers::NONE));
    app.on_key(key('j'));
    assert_eq!(app.selected, Some(1), "stops at the oldest");
    app.on_key(key('k'));
    assert_eq!(app.selected, Some(2));
    app.on_key(KeyEvent::new(KeyCode::Up, KeyModifiers::NONE));
    app.on_key(KeyEvent::new(KeyCode::Up, KeyModifiers::NONE));
    assert_eq!(app.selected, Some(3), "stops at the newest");
}

#[test]
fn p_asks_and_only_y_sends() {
    let mut app = polled_app(Instant::now());
    app.on_key(key('j'));
    assert_eq!(app.on_key(key('p')), None);
    assert_eq!(app.controls.confirm, Some(Command::Pin(2)));
    assert_eq!(app.on_key(key('n')), None);
    assert_eq!(app.controls.confirm, None);
    assert!(app.controls.message.as_ref().unwrap().text.contains("nothing was sent"));

    app.on_key(key('p'));
    assert_eq!(app.on_key(key('q')), None, "q while asked cancels, it does not quit");
    assert!(!app.controls.quit);

    app.on_key(key('p'));
    assert_eq!(app.on_key(key('y')), Some(Command::Pin(2)));
    assert_eq!(app.controls.in_flight, Some(Command::Pin(2)));
    app.on_key(key('u'));
    assert_eq!(app.controls.confirm, None, "one command at a time");

    app.on_update(Update::Answer {
        command: Command::Pin(2),
        result: Ok(PinAnswer {
            state: PinState { serving: 2, pinned: Some(2), newest: 3 },
            message: "generation 2 is serving and pinned".into(),
        }),
    });
    let s = app.snapshot.as_ref().unwrap();
    assert_eq!((s.serving, s.pinned), (2, Some(2)), "the answer shows before the next poll");
    assert!(s.generations.iter().find(|g| g.generation == 2).unwrap().serving);

    app.on_key(key('u'));
    assert_eq!(app.on_key(key('y')), Some(Command::Release));
    app.on_key(key('q'));
    assert!(app.controls.quit);
}

#[test]
fn read_only_refuses_pin_and_release_outright() {
    let mut app = polled_app(Instant::now());
    app.controls.read_only = true;
    for k in ['p', 'u'] {
        assert_eq!(app.on_key(key(k)), None);
        assert_eq!(app.controls.confirm, None);
        let m = app.controls.message.clone().unwrap();
        assert!(m.error && m.text.contains("--read-only"), "{m:?}");
        assert_eq!(app.on_key(key('y')), None);
    }
}

#[test]
fn a_401_without_a_token_says_how_to_give_one() {
    let mut app = polled_app(Instant::now());
    app.controls.has_token = false;
    app.on_update(Update::Answer {
        command: Command::Release,
        result: Err(ClientError::Status { status: 401, message: "this endpoint needs a token".into() }),
    });
    let m = app.controls.message.clone().unwrap();
    assert!(m.error);
    assert!(m.text.contains("release failed: this endpoint needs a token (HTTP 401)"), "{}", m.text);
    assert!(m.text.contains("--token-file"), "{}", m.text);
}

#[test]
fn failed_polls_count_up_and_keep_the_last_timeline() {
    let t0 = Instant::now();
    let mut app = polled_app(t0);
    let refused =
        || ClientError::Unreachable { url: "http://x/admin/generations".into(), reason: "Connection refused".into() };
    app.on_update(Update::Poll { at: t0, generations: Err(refused()), metrics: None });
    app.on_update(Update::Poll { at: t0, generations: Err(refused()), metrics: None });
    match &app.link {
        Link::Down { failures, last_ok, .. } => assert_eq!((*failures, *last_ok), (2, Some(t0))),
        other => panic!("{other:?}"),
    }
    assert!(app.snapshot.is_some());
    app.on_update(Update::Poll { at: t0, generations: Ok(generations()), metrics: None });
    assert_eq!(app.link, Link::Up { last: t0 });
}

#[test]
fn the_main_view_shows_serving_the_timeline_newest_first_and_traffic() {
    let t0 = Instant::now();
    let mut app = polled_app(t0);
    app.on_update(Update::Poll {
        at: t0,
        generations: Ok(generations()),
        metrics: Some(Ok(Scrape::parse(&metrics(0, 0, 0)))),
    });
    app.on_update(Update::Poll {
        at: t0 + Duration::from_secs(1),
        generations: Ok(generations()),
        metrics: Some(Ok(Scrape::parse(&metrics(40, 2, 1)))),
    });
    let now = Now { instant: t0 + Duration::from_millis(1300), wall: wall("2026-01-02T03:05:06Z") };
    let text = screen(&app, now);
    assert!(text.contains("http://127.0.0.1:10254  up · polled 0.3s ago"), "{text}");
    assert!(text.contains("serving generation 3 · newest 3 · history 3 of 10 · not pinned"), "{text}");
    assert!(!text.contains("PINNED"), "{text}");
    assert!(text.contains("requests/s     42.0   2xx 40.0   5xx 2.0"), "{text}");
    assert!(text.contains("upstream errors/s 1.0 (since start 1: connect 1)   active connections 7"), "{text}");
    assert!(text.contains("peak   42.0 req/s █"), "{text}");
    let three = text.find("    3 03:04:05 (60s ago)  serving").unwrap_or_else(|| panic!("{text}"));
    let two = text.find("    2 03:03:05 (2m ago)   published").unwrap_or_else(|| panic!("{text}"));
    let one = text.find("    1 03:02:05 (3m ago)   published").unwrap_or_else(|| panic!("{text}"));
    assert!(three < two && two < one, "newest first:\n{text}");
    assert!(text.contains("! Ingress shop/web: backend svc missing"), "{text}");
    assert!(text.contains("p pin selected"), "{text}");
}

#[test]
fn a_pin_shows_a_banner_and_held_back_generations() {
    let mut g = generations();
    g.pinned = Some(1);
    g.serving = 1;
    for e in &mut g.generations {
        e.serving = e.generation == 1;
        e.published = e.generation != 3;
    }
    let t0 = Instant::now();
    let mut app = App::new("http://127.0.0.1:10254", Duration::from_secs(1), false, false);
    app.on_update(Update::Poll { at: t0, generations: Ok(g), metrics: None });
    let text = screen(&app, Now { instant: t0, wall: wall("2026-01-02T03:05:06Z") });
    assert!(
        text.contains("PINNED to generation 1: generations 2-3 are held back until the pin is released (u)"),
        "{text}"
    );
    assert!(text.contains("held back"), "{text}");
    assert!(text.contains("    1 03:02:05 (3m ago)   PINNED"), "{text}");

    // A short terminal drops the details pane and the traffic panel before the timeline, the
    // banner and the keys.
    let mut terminal = Terminal::new(TestBackend::new(110, 10)).unwrap();
    terminal.draw(|frame| draw(frame, &app, Now { instant: t0, wall: SystemTime::now() })).unwrap();
    let rows: Vec<String> =
        (0..10).map(|y| (0..110).map(|x| terminal.backend().buffer()[(x, y)].symbol().to_string()).collect()).collect();
    assert!(rows[0].contains("ramjet-top"), "{rows:#?}");
    assert!(rows[2].contains("PINNED to generation 1"), "{rows:#?}");
    assert!(rows[9].contains("q quit"), "{rows:#?}");
    assert!(rows.iter().any(|r| r.contains("generations, newest first")), "{rows:#?}");
    assert!(!rows.iter().any(|r| r.contains("┌ traffic") || r.contains("┌ selected")), "{rows:#?}");
}

#[test]
fn an_unreachable_daemon_shows_the_error_and_the_retry() {
    let t0 = Instant::now();
    let mut app = App::new("http://127.0.0.1:1", Duration::from_secs(1), true, false);
    let error = ClientError::Unreachable {
        url: "http://127.0.0.1:1/admin/generations".into(),
        reason: "Connection refused (os error 111)".into(),
    };
    for _ in 0..3 {
        app.on_update(Update::Poll { at: t0, generations: Err(error.clone()), metrics: None });
    }
    let text = screen(&app, Now { instant: t0, wall: SystemTime::now() });
    assert!(text.contains("UNREACHABLE"), "{text}");
    assert!(
        text.contains("cannot reach http://127.0.0.1:1/admin/generations: Connection refused (os error 111)"),
        "{text}"
    );
    assert!(text.contains("retrying every 1.0s (3 failed polls); no answer yet since ramjet-top started"), "{text}");
    assert!(text.contains("read-only"), "{text}");
    assert!(text.contains("pin and release are off (--read-only)"), "{text}");
}

#[test]
fn the_confirmation_says_what_will_happen() {
    let t0 = Instant::now();
    let mut app = polled_app(t0);
    app.on_key(key('j'));
    app.on_key(key('p'));
    let text = screen(&app, Now { instant: t0, wall: SystemTime::now() });
    assert!(text.contains("Pin generation 2?"), "{text}");
    assert!(text.contains("Traffic moves to generation 2 now (serving: 3)"), "{text}");
    app.on_key(key('n'));
    app.on_key(key('u'));
    let text = screen(&app, Now { instant: t0, wall: SystemTime::now() });
    assert!(text.contains("Release the pin?"), "{text}");
}

#[test]
fn admin_urls_are_checked_before_anything_starts() {
    assert_eq!(admin_url("127.0.0.1:10254").unwrap(), "http://127.0.0.1:10254");
    assert_eq!(admin_url("http://localhost:9/").unwrap(), "http://localhost:9");
    assert!(admin_url("https://10.0.0.1:10254").unwrap_err().to_string().contains("port-forward"));
    assert!(admin_url("http://user:secret@host:1").unwrap_err().to_string().contains("--token-file"));
    assert!(admin_url("http://").is_err());
    assert!(interval("50ms").is_err());
    assert_eq!(interval("250ms").unwrap(), Duration::from_millis(250));
}

#[test]
fn the_token_never_shows_in_debug_output() {
    let token = Token::new("  s3cr3t-value\n").unwrap();
    assert!(!format!("{token:?}").contains("s3cr3t"));
    assert_eq!(Token::new(" \n"), None);
}

/// A loopback listener that answers each request with `status` and `body`, and hands over the
/// request heads it saw.
fn recording_server(answers: Vec<(u16, &'static str)>) -> (String, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for (status, body) in answers {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream);
            let mut head = String::new();
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
                head.push_str(&line);
                if line == "\r\n" {
                    break;
                }
            }
            let mut request_body = vec![0; length];
            reader.read_exact(&mut request_body).unwrap();
            head.push_str(&String::from_utf8_lossy(&request_body));
            tx.send(head).unwrap();
            let mut stream = reader.into_inner();
            write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        }
    });
    (format!("http://{addr}"), rx)
}

#[test]
fn the_token_goes_on_pin_and_release_only() {
    let answer = r#"{"serving":1,"pinned":1,"newest":3,"message":"ok"}"#;
    let (base, heads) = recording_server(vec![
        (200, GENERATIONS),
        (200, "ramjet_connections_active 1\n"),
        (200, answer),
        (200, answer),
    ]);
    let client = AdminClient::new(&base, Duration::from_secs(10), Token::new("s3cr3t"));
    assert_eq!(client.generations().unwrap().serving, 3);
    assert_eq!(client.metrics().unwrap().connections_active, Some(1.0));
    assert_eq!(client.pin(1).unwrap().state.pinned, Some(1));
    client.release().unwrap();
    let heads: Vec<String> = heads.iter().take(4).collect();
    for get in &heads[..2] {
        assert!(get.starts_with("GET "), "{get}");
        assert!(!get.to_ascii_lowercase().contains("authorization"), "polling must not carry the token:\n{get}");
    }
    assert!(heads[2].starts_with("POST /admin/rollback "), "{}", heads[2]);
    assert!(heads[2].contains("\r\n\r\n{\"generation\":1}"), "{}", heads[2]);
    assert!(heads[3].starts_with("DELETE /admin/rollback "), "{}", heads[3]);
    for verb in &heads[2..] {
        assert!(verb.to_ascii_lowercase().contains("authorization: bearer s3cr3t\r\n"), "{verb}");
    }
}

#[test]
fn error_answers_carry_the_daemons_message() {
    let (base, _heads) = recording_server(vec![
        (404, r#"{"error":"generation 9 is not in the history; the generations that are: [3, 2, 1]"}"#),
        (502, "bad gateway from a proxy in between"),
    ]);
    let client = AdminClient::new(&base, Duration::from_secs(10), None);
    assert_eq!(
        client.pin(9).unwrap_err().to_string(),
        "generation 9 is not in the history; the generations that are: [3, 2, 1] (HTTP 404)"
    );
    assert_eq!(client.generations().unwrap_err().to_string(), "bad gateway from a proxy in between (HTTP 502)");

    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let client = AdminClient::new(&format!("http://{closed}"), Duration::from_secs(10), None);
    match client.generations() {
        Err(ClientError::Unreachable { url, .. }) => {
            assert_eq!(url, format!("http://{closed}/admin/generations"))
        }
        other => panic!("{other:?}"),
    }
}

fn traffic(ok: u64, errors: u64, slow: u64) -> crate::model::Traffic {
    serde_json::from_str(&format!(
        r#"{{"bounds":[0.005,0.01,0.025,0.05,0.1,0.25,0.5,1.0,2.5,5.0,10.0],"routes":[
          {{"route":"shop/web","backend":"shop/web:80","requests":{},"client_errors":0,"server_errors":{errors},
           "duration_buckets":[{ok},0,0,0,0,0,{slow},0,0,0,0,0],"duration_sum_us":0,"bytes_in":0,"bytes_out":0,
           "upstream_connect_errors":0}},
          {{"route":"shop/api","backend":"shop/api:8080","requests":5,"client_errors":0,"server_errors":0,
           "duration_buckets":[5,0,0,0,0,0,0,0,0,0,0,0],"duration_sum_us":0,"bytes_in":0,"bytes_out":0,
           "upstream_connect_errors":0,"a_field_from_a_newer_daemon":1}}]}}"#,
        ok + errors + slow
    ))
    .unwrap()
}

#[test]
fn the_routes_panel_shows_rates_error_share_and_p99_per_route() {
    let t0 = Instant::now();
    let mut app = polled_app(t0);
    let poll = |at, routes| Update::Poll {
        at,
        generations: Ok(generations()),
        metrics: Some(Ok(Scrape { routes: Some(routes), ..Scrape::parse(&metrics(0, 0, 0)) })),
    };
    app.on_update(poll(t0, traffic(0, 0, 0)));
    assert!(app.routes.rows.is_empty(), "one poll gives no rates");
    // In 2 s: 196 fast successes, 2 errors and 2 requests slower than 250 ms on shop/web; nothing on shop/api.
    app.on_update(poll(t0 + Duration::from_secs(2), traffic(196, 2, 2)));
    let web = &app.routes.rows[0];
    assert_eq!((web.route.as_str(), web.requests_per_s), ("shop/web", 100.0));
    assert_eq!(web.error_ratio, Some(0.01));
    assert_eq!(web.p99, Some(0.5), "the 99th percentile lies in the (0.25, 0.5] bucket");
    let api = &app.routes.rows[1];
    assert_eq!((api.requests_per_s, api.error_ratio, api.p99), (0.0, None, None));
    let now = Now { instant: t0 + Duration::from_millis(2300), wall: wall("2026-01-02T03:05:06Z") };
    let text = screen(&app, now);
    assert!(text.contains("routes (busiest first)"), "{text}");
    assert!(
        text.contains("shop/web                     shop/web:80                        100     1.0    500ms"),
        "{text}"
    );
    assert!(
        text.contains("shop/api                     shop/api:8080                        0       -        -"),
        "{text}"
    );
}
