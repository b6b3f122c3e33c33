//! `ramjet-top`: a terminal UI for one replica's generation timeline, its traffic, and the two
//! admin verbs an operator reaches for during an incident, pin (rollback) and release.
//!
//! How data flows:
//!
//! ```text
//!  poller:    GET /admin/generations, /metrics, /admin/traffic, every --interval ─┐
//!                                                                                ├─ Update ─> App ─> ui::draw
//!  commander: POST / DELETE /admin/rollback ─────────────────────────────────────┘
//!      ^
//!      └──── Command <── App::on_key <── `p`/`u`, then `y` ── key press
//! ```
//!
//! `--fleet HOST:PORT` shows every replica behind one name instead ([`app::fleet`], [`ui::fleet`]):
//! the same threads ([`worker::spawn`]) poll all of them at once and send a pin by digest, or a
//! release, to all of them at once ([`fleet::each`]); the same keys and confirmation apply.
//!
//! The UI thread does no network I/O: it waits at most [`TICK`] for a key, drains the updates, and
//! draws. A dead or hung daemon shows as unreachable, with the error, and is polled again every
//! interval. The bearer token (`--token-file` or `RAMJET_TOP_TOKEN_FILE`) goes on `POST` and
//! `DELETE` only, and is never shown or logged.
//!
//! ```no_run
//! use clap::Parser;
//! let cli = ramjet_top::TopCli::parse_from(["ramjet-top", "--admin", "http://127.0.0.1:10254"]);
//! ramjet_top::run(cli).unwrap();
//! ```

pub mod app;
pub mod client;
pub mod fleet;
pub mod model;
pub mod ui;
pub mod worker;

#[cfg(test)]
mod tests;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::mpsc::TryRecvError;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use crossterm::event::{self, Event, KeyEventKind};
use ratatui::{DefaultTerminal, Frame};

use app::fleet::FleetApp;
use app::{App, View};
use client::{AdminClient, Token};
use worker::Worker;

/// The longest the UI waits for a key before it looks at the updates and redraws.
pub const TICK: Duration = Duration::from_millis(100);

/// Each call to the admin API gives up after this; the next poll tries again.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Command-line flags; each can also be set as `RAMJET_TOP_<FLAG>`.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "ramjet-top",
    version,
    about = "Watch a ramjet replica's generations and traffic, and pin or release a generation"
)]
pub struct TopCli {
    /// The daemon's admin listener (plain http; reach a pod with `kubectl port-forward`).
    #[arg(long, env = "RAMJET_TOP_ADMIN", value_name = "URL", default_value = "http://127.0.0.1:10254")]
    pub admin: String,

    /// How often /admin/generations and /metrics are polled.
    #[arg(long, env = "RAMJET_TOP_INTERVAL", default_value = "1s", value_parser = interval)]
    pub interval: Duration,

    /// Watch only: refuse `p` (pin) and `u` (release).
    #[arg(long, env = "RAMJET_TOP_READ_ONLY")]
    pub read_only: bool,

    /// File holding the bearer token for pin and release (the daemon's --admin-token-file).
    #[arg(long, env = "RAMJET_TOP_TOKEN_FILE", value_name = "PATH")]
    pub token_file: Option<PathBuf>,

    /// Every replica behind this name (the chart's headless `<release>-fleet` Service), instead of
    /// one daemon: in a terminal, the fleet view (one row per replica, `p` pins a table on all of
    /// them, `u` releases all); with --pin, --release or no terminal, one line per replica, and
    /// exit non-zero unless every replica answered.
    #[arg(long, env = "RAMJET_TOP_FLEET", value_name = "HOST:PORT", conflicts_with = "admin")]
    pub fleet: Option<String>,

    /// Use these addresses for HOST instead of asking DNS (like curl's --resolve); repeatable.
    #[arg(long, value_name = "HOST:ADDR[,ADDR...]", requires = "fleet")]
    pub resolve: Vec<fleet::Override>,

    /// With --fleet: pin the generation with this digest (8 to 64 hex digits) on every replica.
    #[arg(long, value_name = "DIGEST", requires = "fleet", conflicts_with = "release")]
    pub pin: Option<String>,

    /// With --fleet: release the pin on every replica (each then serves its newest generation).
    #[arg(long, requires = "fleet")]
    pub release: bool,
}

fn interval(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("`{s}` is not a duration like 500ms or 2s: {e}"))?;
    if d < Duration::from_millis(100) || d > Duration::from_secs(3600) {
        return Err(format!("`{s}` is outside 100ms..1h"));
    }
    Ok(d)
}

/// Checks and normalises `--admin`: `host:port` gets `http://`; https and credentials in the URL
/// are refused with the reason.
pub fn admin_url(raw: &str) -> anyhow::Result<String> {
    let raw = raw.trim();
    let url = if raw.contains("://") { raw.to_string() } else { format!("http://{raw}") };
    let Some(rest) = url.strip_prefix("http://") else {
        bail!(
            "--admin {raw}: only http:// is spoken (the admin port has no TLS); \
             reach a remote daemon through `kubectl port-forward` or an SSH tunnel"
        );
    };
    let rest = rest.trim_end_matches('/');
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        bail!("--admin {raw}: no host; use a URL like http://127.0.0.1:10254");
    }
    if authority.contains('@') {
        bail!(
            "--admin: credentials do not belong in the URL; \
             put the token in a file and pass --token-file"
        );
    }
    Ok(format!("http://{rest}"))
}

/// Reads the bearer token; surrounding whitespace is dropped. The error never quotes the file.
pub fn read_token(path: &Path) -> anyhow::Result<Token> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--token-file {}: cannot read it", path.display()))?;
    Token::new(&text)
        .with_context(|| format!("--token-file {}: the file is empty; put the token in it", path.display()))
}

/// `--fleet` for scripts ([`prints`]): asks every replica behind the name, prints one line each and
/// a summary, and returns whether every replica answered.
pub fn run_fleet(cli: &TopCli) -> anyhow::Result<bool> {
    let name = cli.fleet.as_deref().context("--fleet is not set")?;
    let ask = match (&cli.pin, cli.release) {
        (Some(digest), _) => fleet::Ask::Pin(digest.clone()),
        (None, true) => fleet::Ask::Release,
        (None, false) => fleet::Ask::Status,
    };
    if cli.read_only && ask != fleet::Ask::Status {
        bail!("--read-only refuses --pin and --release");
    }
    let token = cli.token_file.as_deref().map(read_token).transpose()?;
    let replicas = fleet::resolve(name, &cli.resolve)?;
    let answers = fleet::ask(&replicas, &ask, token.as_ref(), REQUEST_TIMEOUT);
    print!("{}", fleet::report(&answers));
    Ok(answers.iter().all(|(_, a)| a.is_ok()))
}

/// Whether `--fleet` prints instead of drawing: with `--pin` or `--release`, or when standard output
/// is not a terminal (a script, a pipe, `kubectl exec` without `-t`).
pub fn prints(cli: &TopCli) -> bool {
    cli.fleet.is_some() && (cli.pin.is_some() || cli.release || !std::io::stdout().is_terminal())
}

/// Runs `ramjet-top` until `q`: the view of one replica, or with `--fleet` the view of every
/// replica behind the name. Flags are checked, and the name looked up, before the terminal is
/// touched.
pub fn run(cli: TopCli) -> anyhow::Result<()> {
    let token = cli.token_file.as_deref().map(read_token).transpose()?;
    let has_token = token.is_some();
    if let Some(name) = &cli.fleet {
        let replicas = fleet::Fleet::new(name, &cli.resolve)?;
        needs_terminal()?;
        let app = FleetApp::new(name.clone(), cli.interval, cli.read_only, has_token);
        let worker = worker::fleet(replicas, token, cli.interval, REQUEST_TIMEOUT)
            .context("cannot start the polling threads")?;
        return in_terminal(app, &worker, ui::fleet::draw);
    }
    let admin = admin_url(&cli.admin)?;
    needs_terminal()?;
    let app = App::new(admin.clone(), cli.interval, cli.read_only, has_token);
    let worker = worker::single(AdminClient::new(&admin, REQUEST_TIMEOUT, token), cli.interval)
        .context("cannot start the polling threads")?;
    in_terminal(app, &worker, ui::draw)
}

fn needs_terminal() -> anyhow::Result<()> {
    if !std::io::stdout().is_terminal() {
        bail!("ramjet-top draws a full-screen view and needs a terminal on standard output");
    }
    Ok(())
}

/// Raw mode and the alternate screen for the event loop, with a panic hook that restores the
/// terminal first; the terminal is restored however the loop ends.
fn in_terminal<V: View>(
    app: V,
    worker: &Worker<V::Command, V::Update>,
    draw: fn(&mut Frame, &V, ui::Now),
) -> anyhow::Result<()> {
    let mut terminal = match ratatui::try_init() {
        Ok(terminal) => terminal,
        Err(e) => {
            ratatui::restore();
            return Err(e).context("cannot set up the terminal");
        }
    };
    let result = event_loop(&mut terminal, app, worker, draw);
    ratatui::restore();
    result
}

fn event_loop<V: View>(
    terminal: &mut DefaultTerminal,
    mut app: V,
    worker: &Worker<V::Command, V::Update>,
    draw: fn(&mut Frame, &V, ui::Now),
) -> anyhow::Result<()> {
    loop {
        terminal.draw(|frame| draw(frame, &app, ui::Now::read()))?;
        let mut wait = TICK;
        while event::poll(wait)? {
            wait = Duration::ZERO;
            if let Event::Key(key) = event::read()? {
                if key.kind != KeyEventKind::Press {
                    continue;
                }
                if let Some(command) = app.on_key(key) {
                    if worker.commands.send(command).is_err() {
                        bail!("the command thread stopped unexpectedly");
                    }
                }
            }
            if app.quit() {
                return Ok(());
            }
        }
        loop {
            match worker.updates.try_recv() {
                Ok(update) => app.on_update(update),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    bail!("the polling threads stopped unexpectedly")
                }
            }
        }
        if !worker.alive() {
            bail!("a polling thread stopped unexpectedly");
        }
    }
}
