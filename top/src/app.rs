//! The state of `ramjet-top` and what keys and updates do to it. No I/O and no terminal here:
//! [`View::on_key`] turns a key into at most one [`Command`] for the background threads, and
//! [`View::on_update`] folds in what they report. [`Controls`] is what both views share: the
//! keys, and pin and release asked, confirmed and answered; [`fleet`] is the view of every replica behind one name.

pub mod fleet;

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::client::ClientError;
use super::model::{Generations, PinState, RouteTraffic, Scrape, Traffic as RouteCounters};
use super::worker::{Command, Update};

/// Requests/s samples kept for the sparkline.
const SPARKLINE_SAMPLES: usize = 240;

/// How `ramjet-top` sees the daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// No poll has finished yet.
    Connecting,
    /// The last poll of `/admin/generations` was answered.
    Up { last: Instant },
    /// The last `failures` polls were not; the timeline shown (if any) is from `last_ok`.
    Down { error: ClientError, failures: u32, last_ok: Option<Instant> },
}

/// A line for the operator at the bottom of the screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub text: String,
    pub error: bool,
}

impl Message {
    pub fn info(text: impl Into<String>) -> Message {
        Message { text: text.into(), error: false }
    }

    pub fn error(text: impl Into<String>) -> Message {
        Message { text: text.into(), error: true }
    }
}

/// Traffic figures from consecutive scrapes of `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct Traffic {
    last: Option<(Instant, Scrape)>,
    /// Rates between the last two scrapes; `None` until there are two (or after a counter reset).
    pub rates: Option<Rates>,
    /// Total requests/s, oldest first.
    pub history: VecDeque<f64>,
    /// Why the last scrape failed, while `/admin/generations` answered.
    pub error: Option<String>,
}

/// Per-second rates computed from counter deltas.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rates {
    pub requests: BTreeMap<String, f64>,
    pub requests_total: f64,
    pub upstream_errors: f64,
}

impl Traffic {
    /// Takes a scrape made at `at`. A counter that went down means the daemon restarted: that
    /// interval has no rate, and counting starts again from this scrape.
    pub fn record(&mut self, at: Instant, scrape: Scrape) {
        self.error = None;
        if let Some((before, previous)) = &self.last {
            let secs = at.saturating_duration_since(*before).as_secs_f64();
            if secs > 0.0 {
                self.rates = rates(previous, &scrape, secs);
                if let Some(r) = &self.rates {
                    if self.history.len() == SPARKLINE_SAMPLES {
                        self.history.pop_front();
                    }
                    self.history.push_back(r.requests_total);
                }
            }
        }
        self.last = Some((at, scrape));
    }

    /// The last scrape: counters since the daemon started, and the active connections.
    pub fn latest(&self) -> Option<&Scrape> {
        self.last.as_ref().map(|(_, s)| s)
    }
}

fn rates(before: &Scrape, now: &Scrape, secs: f64) -> Option<Rates> {
    let mut requests = BTreeMap::new();
    for (class, &value) in &now.requests {
        let old = before.requests.get(class).copied().unwrap_or(0.0);
        if value < old {
            return None;
        }
        requests.insert(class.clone(), (value - old) / secs);
    }
    let errors_now = now.upstream_errors_total();
    let errors_before = before.upstream_errors_total();
    if errors_now < errors_before || now.requests_total() < before.requests_total() {
        return None;
    }
    Some(Rates {
        requests_total: (now.requests_total() - before.requests_total()) / secs,
        requests,
        upstream_errors: (errors_now - errors_before) / secs,
    })
}

/// Per route and backend figures from consecutive polls of `/admin/traffic`.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    last: Option<(Instant, RouteCounters)>,
    /// Between the last two polls, busiest first; empty until there are two.
    pub rows: Vec<RouteRow>,
}

/// One route and backend between two polls.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteRow {
    pub route: String,
    pub backend: String,
    pub requests_per_s: f64,
    /// Share of the interval's requests answered 5xx (`None` without requests).
    pub error_ratio: Option<f64>,
    /// Upper bound of the bucket holding the interval's 99th percentile, seconds.
    pub p99: Option<f64>,
}

impl Routes {
    /// Takes a poll made at `at`; series that are new or went down (a restart) start from zero.
    pub fn record(&mut self, at: Instant, now: RouteCounters) {
        if let Some((before, previous)) = &self.last {
            let secs = at.saturating_duration_since(*before).as_secs_f64();
            if secs > 0.0 {
                self.rows = route_rows(previous, &now, secs);
            }
        }
        self.last = Some((at, now));
    }
}

fn route_rows(before: &RouteCounters, now: &RouteCounters, secs: f64) -> Vec<RouteRow> {
    let empty = RouteTraffic {
        route: String::new(),
        backend: String::new(),
        requests: 0,
        client_errors: 0,
        server_errors: 0,
        duration_buckets: Vec::new(),
        duration_sum_us: 0,
        bytes_in: 0,
        bytes_out: 0,
        upstream_connect_errors: 0,
    };
    let mut rows: Vec<RouteRow> = now
        .routes
        .iter()
        .map(|r| {
            let old = before
                .routes
                .iter()
                .find(|o| o.route == r.route && o.backend == r.backend && o.requests <= r.requests)
                .unwrap_or(&empty);
            let requests = r.requests - old.requests;
            let buckets: Vec<u64> = r
                .duration_buckets
                .iter()
                .enumerate()
                .map(|(i, n)| n.saturating_sub(old.duration_buckets.get(i).copied().unwrap_or(0)))
                .collect();
            RouteRow {
                route: r.route.clone(),
                backend: r.backend.clone(),
                requests_per_s: requests as f64 / secs,
                error_ratio: (requests > 0)
                    .then(|| r.server_errors.saturating_sub(old.server_errors) as f64 / requests as f64),
                p99: RouteTraffic::quantile_bound(&now.bounds, &buckets, 0.99),
            }
        })
        .collect();
    rows.sort_by(|a, b| b.requests_per_s.total_cmp(&a.requests_per_s).then_with(|| a.route.cmp(&b.route)));
    rows
}

/// Everything the screen shows.
#[derive(Debug, Clone)]
pub struct App {
    /// The admin URL, as shown in the title.
    pub admin: String,
    pub interval: Duration,
    pub link: Link,
    /// The last answer of `/admin/generations`, kept while the daemon is unreachable.
    pub snapshot: Option<Generations>,
    /// The selected generation, by number so it stays put as new ones arrive.
    pub selected: Option<u64>,
    /// The keys: what is asked, what is in flight, the message line, quit.
    pub controls: Controls<Command>,
    pub traffic: Traffic,
    /// Per route and backend traffic.
    pub routes: Routes,
}

impl App {
    pub fn new(admin: impl Into<String>, interval: Duration, read_only: bool, has_token: bool) -> App {
        App {
            admin: admin.into(),
            interval,
            link: Link::Connecting,
            snapshot: None,
            selected: None,
            controls: Controls::new(read_only, has_token),
            traffic: Traffic::default(),
            routes: Routes::default(),
        }
    }

    /// The index of the selected generation in the snapshot's list.
    pub fn selected_index(&self) -> Option<usize> {
        let snapshot = self.snapshot.as_ref()?;
        let selected = self.selected?;
        snapshot.generations.iter().position(|g| g.generation == selected)
    }
}

impl View for App {
    type Command = Command;
    type Update = Update;

    fn on_key(&mut self, key: KeyEvent) -> Option<Command> {
        let rows: Vec<u64> = self.snapshot.iter().flat_map(|s| &s.generations).map(|g| g.generation).collect();
        let nothing = "nothing to pin: the daemon has not listed any generation yet";
        self.controls.on_key(key, &rows, &mut self.selected, |n| Command::Pin(*n), Command::Release, nothing)
    }

    fn on_update(&mut self, update: Update) {
        match update {
            Update::Poll { at, generations, metrics } => {
                match generations {
                    Ok(g) => {
                        self.link = Link::Up { last: at };
                        self.set_snapshot(g);
                    }
                    Err(error) => {
                        let (failures, last_ok) = match &self.link {
                            Link::Connecting => (0, None),
                            Link::Up { last } => (0, Some(*last)),
                            Link::Down { failures, last_ok, .. } => (*failures, *last_ok),
                        };
                        self.link = Link::Down { error, failures: failures + 1, last_ok };
                    }
                }
                match metrics {
                    Some(Ok(mut scrape)) => {
                        if let Some(routes) = scrape.routes.take() {
                            self.routes.record(at, routes);
                        }
                        self.traffic.record(at, scrape)
                    }
                    Some(Err(e)) => self.traffic.error = Some(e.to_string()),
                    None => {}
                }
            }
            Update::Answer { command, result } => {
                let message = match result {
                    Ok(answer) => {
                        if let Some(s) = &mut self.snapshot {
                            take_answer(s, &answer.state);
                        }
                        Message::info(format!("daemon: {}", answer.message))
                    }
                    Err(e) => Message::error(self.controls.failure(&command, &e)),
                };
                self.controls.answered(message);
            }
        }
    }

    fn quit(&self) -> bool {
        self.controls.quit
    }
}

impl App {
    fn set_snapshot(&mut self, g: Generations) {
        let keep = self.selected.filter(|n| g.generations.iter().any(|e| e.generation == *n));
        self.selected = keep
            .or(Some(g.serving).filter(|n| g.generations.iter().any(|e| e.generation == *n)))
            .or_else(|| g.generations.first().map(|e| e.generation));
        self.snapshot = Some(g);
    }
}

/// What the event loop needs of a view: a key in, at most one command out; updates in.
pub trait View {
    type Command;
    type Update;
    /// Handles one key press; returns the command to send, if the key confirmed one.
    fn on_key(&mut self, key: KeyEvent) -> Option<Self::Command>;
    /// Folds in what a background thread reported.
    fn on_update(&mut self, update: Self::Update);
    /// Whether the operator asked to quit.
    fn quit(&self) -> bool;
}

/// The daemon said what serves and what is pinned now; show it before the next poll does.
pub fn take_answer(s: &mut Generations, state: &PinState) {
    s.serving = state.serving;
    s.pinned = state.pinned;
    s.newest = state.newest;
    for g in &mut s.generations {
        g.serving = g.generation == state.serving;
        if g.serving {
            g.published = true;
        }
    }
}

/// The entry `by` places from `selected` in `list` (clamped to its ends; from the first entry when
/// nothing is selected); `None` for an empty list.
fn move_in<T: PartialEq + Clone>(list: &[T], selected: Option<&T>, by: isize) -> Option<T> {
    let last = list.len().checked_sub(1)?;
    let at = selected.and_then(|s| list.iter().position(|x| x == s)).unwrap_or(0);
    list.get(at.saturating_add_signed(by).min(last)).cloned()
}

/// How a command is named in the operator's messages: "pin of generation 3", "release".
pub trait Describe {
    fn describe(&self) -> String;
}

impl Describe for Command {
    fn describe(&self) -> String {
        match self {
            Command::Pin(n) => format!("pin of generation {n}"),
            Command::Release => "release".to_string(),
        }
    }
}

/// The keys as both views handle them: moving the selection, quitting, and pin and release —
/// refused outright with `--read-only` or while a command is in flight, asked in a confirmation,
/// sent on `y` only (any other key cancels), one at a time; and the operator's message line.
#[derive(Debug, Clone)]
pub struct Controls<C> {
    pub read_only: bool,
    /// Whether a token was given (never the token itself).
    pub has_token: bool,
    /// A command waiting for `y`.
    pub confirm: Option<C>,
    /// A command sent and not answered yet.
    pub in_flight: Option<C>,
    pub message: Option<Message>,
    /// `q`, `Esc` or `Ctrl-C` was pressed.
    pub quit: bool,
}

impl<C: Clone + Describe> Controls<C> {
    pub fn new(read_only: bool, has_token: bool) -> Controls<C> {
        Controls { read_only, has_token, confirm: None, in_flight: None, message: None, quit: false }
    }

    /// Handles one key press over the view's `rows` (top to bottom) and its `selected` row; `p`
    /// asks to pin the selected row with the command `pin` makes of it (`nothing` says why not
    /// when no row is selected), `u` asks for `release`. Returns the command to send, if the key
    /// confirmed one.
    pub fn on_key<T: PartialEq + Clone>(
        &mut self,
        key: KeyEvent,
        rows: &[T],
        selected: &mut Option<T>,
        pin: impl FnOnce(&T) -> C,
        release: C,
        nothing: &str,
    ) -> Option<C> {
        let ctrl_c = key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c');
        if ctrl_c {
            self.quit = true;
            return None;
        }
        if let Some(command) = self.confirm.take() {
            // Only `y` sends; any other key, `q` included, cancels and sends nothing.
            if matches!(key.code, KeyCode::Char('y') | KeyCode::Char('Y')) {
                self.message = Some(Message::info(format!("{}: waiting for the daemon...", command.describe())));
                self.in_flight = Some(command.clone());
                return Some(command);
            }
            self.message = Some(Message::info(format!("{} cancelled; nothing was sent.", command.describe())));
            return None;
        }
        let by = match key.code {
            KeyCode::Up | KeyCode::Char('k') => -1,
            KeyCode::Down | KeyCode::Char('j') => 1,
            KeyCode::Home | KeyCode::Char('g') => isize::MIN,
            KeyCode::End | KeyCode::Char('G') => isize::MAX,
            KeyCode::Char('q') | KeyCode::Esc => {
                self.quit = true;
                return None;
            }
            KeyCode::Char('p') if self.allowed() => {
                self.ask(selected.as_ref().map(pin).ok_or(nothing));
                return None;
            }
            KeyCode::Char('u') if self.allowed() => {
                self.ask(Ok(release));
                return None;
            }
            _ => return None,
        };
        if let Some(row) = move_in(rows, selected.as_ref(), by) {
            *selected = Some(row);
        }
        None
    }

    /// Whether a verb may be asked now; says why not when it may not.
    fn allowed(&mut self) -> bool {
        if self.read_only {
            self.message = Some(Message::error(
                "read-only: ramjet-top was started with --read-only, so pin and release are refused",
            ));
            return false;
        }
        if let Some(command) = &self.in_flight {
            self.message =
                Some(Message::error(format!("{} is still waiting for the daemon's answer", command.describe())));
            return false;
        }
        true
    }

    /// Asks the operator to confirm `command`, or says why there is nothing to ask.
    fn ask(&mut self, command: Result<C, &str>) {
        match command {
            Ok(command) => {
                self.message = None;
                self.confirm = Some(command);
            }
            Err(why) => self.message = Some(Message::error(why)),
        }
    }

    /// The answer to the command in flight arrived; `message` says what it was.
    pub fn answered(&mut self, message: Message) {
        self.in_flight = None;
        self.message = Some(message);
    }

    /// "pin of generation 1 failed: ...", with how to give a token when a daemon wanted one.
    pub fn failure(&self, command: &C, e: &ClientError) -> String {
        format!("{} failed: {e}{}", command.describe(), self.token_hint(e))
    }

    /// How to give the token, after a 401 when none was given.
    pub fn token_hint(&self, e: &ClientError) -> &'static str {
        if matches!(e, ClientError::Status { status: 401, .. }) && !self.has_token {
            "; give ramjet-top the token with --token-file PATH (or RAMJET_TOP_TOKEN_FILE)"
        } else {
            ""
        }
    }
}
