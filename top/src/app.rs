//! The state of `ramjet-top` and what keys and updates do to it. No I/O and no terminal here:
//! [`App::on_key`] turns a key into at most one [`Command`] for the background threads, and
//! [`App::on_update`] folds in what they report.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::client::ClientError;
use super::model::{Generations, PinAnswer, Scrape};
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
    fn info(text: impl Into<String>) -> Message {
        Message { text: text.into(), error: false }
    }

    fn error(text: impl Into<String>) -> Message {
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

/// Everything the screen shows.
#[derive(Debug, Clone)]
pub struct App {
    /// The admin URL, as shown in the title.
    pub admin: String,
    pub interval: Duration,
    pub read_only: bool,
    /// Whether a token was given (never the token itself).
    pub has_token: bool,
    pub link: Link,
    /// The last answer of `/admin/generations`, kept while the daemon is unreachable.
    pub snapshot: Option<Generations>,
    /// The selected generation, by number so it stays put as new ones arrive.
    pub selected: Option<u64>,
    /// A command waiting for `y`.
    pub confirm: Option<Command>,
    /// A command sent and not answered yet.
    pub in_flight: Option<Command>,
    pub message: Option<Message>,
    pub traffic: Traffic,
    pub quit: bool,
}

impl App {
    pub fn new(admin: impl Into<String>, interval: Duration, read_only: bool, has_token: bool) -> App {
        App {
            admin: admin.into(),
            interval,
            read_only,
            has_token,
            link: Link::Connecting,
            snapshot: None,
            selected: None,
            confirm: None,
            in_flight: None,
            message: None,
            traffic: Traffic::default(),
            quit: false,
        }
    }

    /// The index of the selected generation in the snapshot's list.
    pub fn selected_index(&self) -> Option<usize> {
        let snapshot = self.snapshot.as_ref()?;
        let selected = self.selected?;
        snapshot.generations.iter().position(|g| g.generation == selected)
    }

    /// Handles one key press; returns the command to send, if the key confirmed one.
    pub fn on_key(&mut self, key: KeyEvent) -> Option<Command> {
        let ctrl_c = key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c');
        if ctrl_c {
            self.quit = true;
            return None;
        }
        if let Some(command) = self.confirm.take() {
            // Only `y` sends; any other key, `q` included, cancels and sends nothing.
            if matches!(key.code, KeyCode::Char('y') | KeyCode::Char('Y')) {
                self.in_flight = Some(command);
                self.message = Some(Message::info(format!("{}: waiting for the daemon...", describe(command))));
                return Some(command);
            }
            self.message = Some(Message::info(format!("{} cancelled; nothing was sent.", describe(command))));
            return None;
        }
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => self.quit = true,
            KeyCode::Up | KeyCode::Char('k') => self.move_selection(-1),
            KeyCode::Down | KeyCode::Char('j') => self.move_selection(1),
            KeyCode::Home | KeyCode::Char('g') => self.move_selection(isize::MIN),
            KeyCode::End | KeyCode::Char('G') => self.move_selection(isize::MAX),
            KeyCode::Char('p') => self.ask(Verb::Pin),
            KeyCode::Char('u') => self.ask(Verb::Release),
            _ => {}
        }
        None
    }

    fn move_selection(&mut self, by: isize) {
        let Some(snapshot) = &self.snapshot else {
            return;
        };
        if snapshot.generations.is_empty() {
            return;
        }
        let last = snapshot.generations.len() - 1;
        let at = self.selected_index().unwrap_or(0);
        let to = at.saturating_add_signed(by).min(last);
        self.selected = Some(snapshot.generations[to].generation);
    }

    fn ask(&mut self, verb: Verb) {
        if self.read_only {
            self.message = Some(Message::error(
                "read-only: ramjet-top was started with --read-only, so pin and release are refused",
            ));
            return;
        }
        if let Some(command) = self.in_flight {
            self.message =
                Some(Message::error(format!("{} is still waiting for the daemon's answer", describe(command))));
            return;
        }
        let command = match verb {
            Verb::Pin => match (self.selected, &self.snapshot) {
                (Some(generation), Some(_)) => Command::Pin(generation),
                _ => {
                    self.message = Some(Message::error("nothing to pin: the daemon has not listed any generation yet"));
                    return;
                }
            },
            Verb::Release => Command::Release,
        };
        self.message = None;
        self.confirm = Some(command);
    }

    /// Folds in what a background thread reported.
    pub fn on_update(&mut self, update: Update) {
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
                    Some(Ok(scrape)) => self.traffic.record(at, scrape),
                    Some(Err(e)) => self.traffic.error = Some(e.to_string()),
                    None => {}
                }
            }
            Update::Answer { command, result } => {
                self.in_flight = None;
                self.message = Some(match result {
                    Ok(answer) => {
                        self.take_answer(&answer);
                        Message::info(format!("daemon: {}", answer.message))
                    }
                    Err(e) => {
                        let mut text = format!("{} failed: {e}", describe(command));
                        if matches!(e, ClientError::Status { status: 401, .. }) && !self.has_token {
                            text.push_str("; give ramjet-top the token with ");
                            text.push_str("--token-file PATH (or RAMJET_TOP_TOKEN_FILE)");
                        }
                        Message::error(text)
                    }
                });
            }
        }
    }

    fn set_snapshot(&mut self, g: Generations) {
        let keep = self.selected.filter(|n| g.generations.iter().any(|e| e.generation == *n));
        self.selected = keep
            .or(Some(g.serving).filter(|n| g.generations.iter().any(|e| e.generation == *n)))
            .or_else(|| g.generations.first().map(|e| e.generation));
        self.snapshot = Some(g);
    }

    /// The daemon said what serves and what is pinned now; show it before the next poll does.
    fn take_answer(&mut self, answer: &PinAnswer) {
        if let Some(s) = &mut self.snapshot {
            s.serving = answer.state.serving;
            s.pinned = answer.state.pinned;
            s.newest = answer.state.newest;
            for g in &mut s.generations {
                g.serving = g.generation == answer.state.serving;
                if g.serving {
                    g.published = true;
                }
            }
        }
    }
}

enum Verb {
    Pin,
    Release,
}

/// "pin of generation 3" / "release".
pub fn describe(command: Command) -> String {
    match command {
        Command::Pin(n) => format!("pin of generation {n}"),
        Command::Release => "release".to_string(),
    }
}
