//! The fleet view without a terminal: what it makes of four replicas' answers (two alike, one
//! pinned elsewhere, one unreachable), the keys, the counts in the confirmation, and the screen.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime};

use super::{generations, key, render};
use crate::app::fleet::{FleetApp, Plan};
use crate::app::View;
use crate::client::ClientError;
use crate::model::{Generations, PinAnswer, PinState};
use crate::ui::{fleet::draw, Now};
use crate::worker::{FleetCommand, FleetUpdate};

fn addr(i: u8) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, i], 10254))
}

/// Replica 1 as the shared test answer; replica 2 the same tables numbered 10 higher; replica 3
/// pinned to the older table `b2b2...`; replica 4 unreachable.
fn answers() -> Vec<(SocketAddr, Result<Generations, ClientError>)> {
    let one = generations();
    let mut two = generations();
    two.serving += 10;
    two.newest += 10;
    for g in &mut two.generations {
        g.generation += 10;
    }
    let mut three = generations();
    three.serving = 2;
    three.pinned = Some(2);
    for g in &mut three.generations {
        g.serving = g.generation == 2;
    }
    let down = ClientError::Unreachable {
        url: "http://127.0.0.4:10254/admin/generations".into(),
        reason: "Connection refused (os error 111)".into(),
    };
    vec![(addr(1), Ok(one)), (addr(2), Ok(two)), (addr(3), Ok(three)), (addr(4), Err(down))]
}

fn polled(at: Instant, has_token: bool) -> FleetApp {
    let mut app = FleetApp::new("edge-fleet:10254", Duration::from_secs(1), false, has_token);
    app.on_update(FleetUpdate::Poll { at, replicas: answers(), lookup_error: None });
    app
}

fn now(at: Instant) -> Now {
    Now { instant: at + Duration::from_millis(300), wall: humantime::parse_rfc3339("2026-01-02T03:05:06Z").unwrap() }
}

#[test]
fn tables_span_the_fleet_newest_first_with_each_replicas_number() {
    let app = polled(Instant::now(), true);
    assert_eq!(app.majority(), Some("c3c3c3c3c3c3"));
    let differs: Vec<bool> = app.replicas.iter().map(|r| app.differs(r)).collect();
    assert_eq!(differs, [false, false, true, false], "the unreachable replica serves nothing that could differ");
    let tables = app.tables();
    let digests: Vec<&str> = tables.iter().map(|t| t.digest.as_str()).collect();
    assert_eq!(digests, ["c3c3c3c3c3c3", "b2b2b2b2b2b2", "a1a1a1a1a1a1"]);
    assert_eq!(tables[0].generations, [Some(3), Some(13), Some(3), None]);
    assert_eq!((tables[0].serving, tables[1].serving, tables[2].serving), (2, 1, 0));
    assert_eq!(app.selected.as_deref(), Some("c3c3c3c3c3c3"), "the table most replicas serve is selected first");
}

#[test]
fn p_pins_the_selected_table_after_y_with_the_counts_of_what_changes() {
    let t0 = Instant::now();
    let mut app = polled(t0, true);
    app.on_key(key('j'));
    assert_eq!(app.selected.as_deref(), Some("b2b2b2b2b2b2"));
    assert_eq!(app.on_key(key('p')), None);
    let pin = FleetCommand::Pin("b2b2b2b2b2b2".into());
    assert_eq!(app.controls.confirm, Some(pin.clone()));
    assert_eq!(app.plan(&pin), Plan { replicas: 4, change: 2, already: 1, other: 0, silent: 1 });
    let text = render(|f| draw(f, &app, now(t0)));
    assert!(text.contains("Pin table b2b2b2b2b2b2 on all 4 replicas?"), "{text}");
    assert!(text.contains("2 of 4 replicas will change: their traffic moves"), "{text}");
    assert_eq!(app.on_key(key('y')), Some(pin.clone()));
    assert_eq!(app.controls.in_flight, Some(pin.clone()));

    let ok = |serving| {
        Ok(PinAnswer {
            state: PinState { serving, pinned: Some(serving), newest: serving + 1 },
            message: format!("generation {serving} is serving and pinned"),
        })
    };
    let down = ClientError::Unreachable {
        url: "http://127.0.0.4:10254/admin/rollback".into(),
        reason: "Connection refused (os error 111)".into(),
    };
    app.on_update(FleetUpdate::Answer {
        command: pin,
        results: vec![(addr(1), ok(2)), (addr(2), ok(12)), (addr(3), ok(2)), (addr(4), Err(down))],
    });
    assert_eq!(app.controls.in_flight, None);
    let m = app.controls.message.clone().unwrap();
    assert!(m.error, "{m:?}");
    assert_eq!(m.text, "pin of table b2b2b2b2b2b2 on every replica: 3 of 4 replicas did it, 1 failed (see below)");
    assert_eq!(app.majority(), Some("b2b2b2b2b2b2"), "the answers show before the next poll");
    let text = render(|f| draw(f, &app, now(t0)));
    assert!(text.contains("last command: pin of table b2b2b2b2b2b2 on every replica"), "{text}");
    assert!(text.contains("127.0.0.2:10254  ok: generation 12 is serving and pinned"), "{text}");
    assert!(
        text.contains(
            "127.0.0.4:10254  FAILED: cannot reach http://127.0.0.4:10254/admin/rollback: Connection refused"
        ),
        "{text}"
    );
    assert!(text.contains("· 3 PINNED"), "{text}");
}

#[test]
fn the_screen_has_a_row_per_replica_marks_the_odd_one_and_says_which_is_down() {
    let t0 = Instant::now();
    let app = polled(t0, true);
    let text = render(|f| draw(f, &app, now(t0)));
    assert!(text.contains("fleet edge-fleet:10254  3 of 4 replicas answer · polled 0.3s ago"), "{text}");
    assert!(text.contains("most common table c3c3c3c3c3c3 (serving on 2 of 4) · 1 DIFFER · 1 PINNED"), "{text}");
    let row = |ip: &str| text.lines().find(|l| l.contains(ip)).unwrap_or_else(|| panic!("{ip}:\n{text}")).to_string();
    assert!(row("127.0.0.2:10254").contains("     13 c3c3c3c3c3c3 not pinned     13 c3c3c3c3c3c3"), "{text}");
    let odd = row("127.0.0.3:10254");
    assert!(odd.contains("      2 b2b2b2b2b2b2 PINNED          3 c3c3c3c3c3c3  DIFFERS from most"), "{text}");
    assert!(row("127.0.0.4:10254").contains("UNREACHABLE: Connection refused (os error 111)"), "{text}");
    assert!(text.contains("> c3c3c3c3c3c3 03:04:05 (61s ago)  2 of 4     3 13 3 -"), "{text}");
    assert!(text.contains("p pin selected table on every replica"), "{text}");
}

#[test]
fn release_counts_the_pinned_and_a_401_without_a_token_says_how_to_give_one() {
    let t0 = Instant::now();
    let mut app = polled(t0, false);
    app.on_key(key('u'));
    assert_eq!(
        app.plan(&FleetCommand::Release),
        Plan { replicas: 4, change: 1, already: 0, other: 2, silent: 1 },
        "one pinned replica moves to its newest; two are not pinned"
    );
    let text = render(|f| draw(f, &app, now(t0)));
    assert!(text.contains("Release the pin on all 4 replicas?"), "{text}");
    assert!(text.contains("1 of 4 replicas will change: each moves to its newest generation."), "{text}");
    assert_eq!(app.on_key(key('y')), Some(FleetCommand::Release));
    let refused = || Err(ClientError::Status { status: 401, message: "this endpoint needs a token".into() });
    app.on_update(FleetUpdate::Answer {
        command: FleetCommand::Release,
        results: (1..=4).map(|i| (addr(i), refused())).collect(),
    });
    let m = app.controls.message.clone().unwrap();
    assert!(m.text.contains("0 of 4 replicas did it, 4 failed (see below)"), "{}", m.text);
    assert!(m.text.contains("--token-file PATH"), "{}", m.text);
    assert_eq!(app.plan(&FleetCommand::Release).change, 1, "a refused release changes nothing shown");
}

#[test]
fn a_failed_lookup_is_shown_with_the_addresses_still_asked() {
    let t0 = Instant::now();
    let mut app = polled(t0, true);
    app.on_update(FleetUpdate::Poll {
        at: t0,
        replicas: answers(),
        lookup_error: Some("--fleet edge-fleet:10254: cannot resolve edge-fleet".into()),
    });
    let text = render(|f| draw(f, &app, Now { instant: t0, wall: SystemTime::now() }));
    assert!(
        text.contains("cannot resolve edge-fleet; asking the 4 addresses of the last lookup that worked"),
        "{text}"
    );
}

#[test]
fn more_replicas_than_rows_are_counted_and_the_tables_keep_their_rows() {
    let t0 = Instant::now();
    let mut app = FleetApp::new("edge-fleet:10254", Duration::from_secs(1), false, true);
    let mut replicas = Vec::new();
    for i in 1..=40 {
        let (_, status) = answers().swap_remove(if i == 40 { 3 } else { 0 });
        replicas.push((addr(i), status));
    }
    app.on_update(FleetUpdate::Poll { at: t0, replicas, lookup_error: None });
    let text = render(|f| draw(f, &app, now(t0)));
    assert!(text.contains("127.0.0.1:10254"), "{text}");
    assert!(!text.contains("127.0.0.40:10254"), "{text}");
    let hidden = text.lines().find(|l| l.contains("more replicas below")).unwrap_or_else(|| panic!("{text}"));
    assert!(hidden.contains("(a taller terminal shows them): 1 do not answer, 0 differ"), "{text}");
    assert!(text.contains("> c3c3c3c3c3c3"), "the tables keep rows to select from:\n{text}");
}
