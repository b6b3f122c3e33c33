//! Drawing: a pure function of [`App`] and the clock, so it can be tested on ratatui's
//! `TestBackend` without a terminal.
//!
//! From the top: the title line (admin URL and whether the daemon answers), the serving line, the
//! PINNED banner while a pin holds, the daemon's error while it is unreachable, the traffic panel
//! with its sparkline, the generation timeline (newest first), the selected generation's details,
//! and the message and key lines. A confirmation asks in a box over the middle. The fleet view
//! ([`fleet`]) is drawn from the same pieces: title, message and key lines, confirmation box.

pub mod fleet;

use std::time::{Duration, Instant, SystemTime};

use ramjet_shared::Severity;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Cell, Clear, Padding, Paragraph, Row, Sparkline, Table, TableState, Wrap};
use ratatui::Frame;

use super::app::{App, Describe, Link, Message};
use super::client::ClientError;
use super::model::{GenerationInfo, Generations};
use super::worker::Command;

/// The two clocks the screen reads: monotonic for "polled 2s ago", wall for the generations' ages.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    pub instant: Instant,
    pub wall: SystemTime,
}

impl Now {
    pub fn read() -> Now {
        Now { instant: Instant::now(), wall: SystemTime::now() }
    }
}

struct Heights {
    title: u16,
    serving: u16,
    banner: u16,
    error: u16,
    traffic: u16,
    routes: u16,
    timeline: u16,
    details: u16,
    message: u16,
    keys: u16,
}

/// Up to `want` of the `rest` rows.
pub fn take(rest: &mut u16, want: u16) -> u16 {
    let got = want.min(*rest);
    *rest -= got;
    got
}

pub fn draw(frame: &mut Frame, app: &App, now: Now) {
    let pinned = app.snapshot.as_ref().and_then(|s| s.pinned);
    let down = matches!(app.link, Link::Down { .. });
    // Rows are handed out in order of importance, so a short terminal loses the details pane,
    // then the traffic panel, before it loses the timeline, the pin banner or the keys.
    let mut rows = frame.area().height;
    let rest = &mut rows;
    let title_h = take(rest, 1);
    let keys_h = take(rest, 1);
    let serving_h = take(rest, 1);
    let banner_h = take(rest, u16::from(pinned.is_some()));
    let error_h = take(rest, if down { 4 } else { 0 });
    let message_h = take(rest, 2);
    let timeline_min = take(rest, 6);
    let traffic_h = take(rest, 5);
    // One row per route and backend, the busiest first, at most eight.
    let route_rows = app.routes.rows.len().min(8) as u16;
    let routes_h = if route_rows > 0 { take(rest, route_rows + 3) } else { 0 };
    let details_h = if *rest >= 5 + 3 { take(rest, 5) } else { 0 };
    let heights = Heights {
        title: title_h,
        keys: keys_h,
        serving: serving_h,
        banner: banner_h,
        error: error_h,
        message: message_h,
        traffic: traffic_h,
        routes: routes_h,
        details: details_h,
        timeline: timeline_min + take(rest, u16::MAX),
    };
    let [title, serving, banner, error, traffic, routes, timeline, details, message, keys] = Layout::vertical(
        [
            heights.title,
            heights.serving,
            heights.banner,
            heights.error,
            heights.traffic,
            heights.routes,
            heights.timeline,
            heights.details,
            heights.message,
            heights.keys,
        ]
        .map(Constraint::Length),
    )
    .areas(frame.area());

    frame.render_widget(title_line(app, now), title);
    frame.render_widget(serving_line(app), serving);
    if let (Some(p), Some(s)) = (pinned, &app.snapshot) {
        frame.render_widget(pin_banner(p, s), banner);
    }
    if let Link::Down { error: e, failures, last_ok } = &app.link {
        frame.render_widget(unreachable_panel(app, e, *failures, *last_ok, now), error);
    }
    draw_traffic(frame, app, traffic);
    if heights.routes > 0 {
        frame.render_widget(routes_panel(app, usize::from(heights.routes.saturating_sub(3))), routes);
    }
    draw_timeline(frame, app, timeline, now);
    frame.render_widget(details_panel(app), details);
    frame.render_widget(message_line(app.controls.message.as_ref()), message);
    frame.render_widget(keys_line(app.controls.read_only, "pin selected"), keys);
    if let Some(command) = app.controls.confirm {
        draw_confirm(frame, app, command);
    }
}

fn title_line(app: &App, now: Now) -> Line<'static> {
    let state = match &app.link {
        Link::Connecting => Span::styled(" connecting ", Style::new().fg(Color::Black).bg(Color::Yellow)),
        Link::Up { last } => Span::styled(
            format!(" up · polled {} ago ", short(now.instant.saturating_duration_since(*last))),
            Style::new().fg(Color::Black).bg(Color::Green),
        ),
        Link::Down { error: ClientError::Unreachable { .. }, .. } => {
            Span::styled(" UNREACHABLE ", Style::new().fg(Color::White).bg(Color::Red).bold())
        }
        Link::Down { .. } => Span::styled(" ERROR ", Style::new().fg(Color::White).bg(Color::Red).bold()),
    };
    title(&app.admin, state, app.controls.read_only)
}

/// ` ramjet-top  <what is watched>  <how it answers>  read-only`.
pub fn title(watched: &str, state: Span<'static>, read_only: bool) -> Line<'static> {
    let mut spans =
        vec![Span::styled(" ramjet-top ", Style::new().bold().reversed()), Span::raw(format!(" {watched} ")), state];
    if read_only {
        spans.push(Span::styled(" read-only ", Style::new().fg(Color::Black).bg(Color::Cyan)));
    }
    Line::from(spans)
}

fn serving_line(app: &App) -> Line<'static> {
    let Some(s) = &app.snapshot else {
        return Line::from(" waiting for the daemon's first answer...".dim());
    };
    let mut spans = vec![
        Span::raw(" serving generation "),
        Span::styled(s.serving.to_string(), Style::new().bold().fg(Color::Green)),
        Span::raw(format!(" · newest {} · history {} of {}", s.newest, s.generations.len(), s.history_size)),
    ];
    if s.pinned.is_none() {
        spans.push(Span::raw(" · not pinned"));
    }
    Line::from(spans)
}

fn pin_banner(pinned: u64, s: &Generations) -> Paragraph<'static> {
    let held: Vec<u64> = s.generations.iter().map(|g| g.generation).filter(|n| *n > pinned).collect();
    let held = match (held.iter().min(), held.iter().max()) {
        (Some(a), Some(b)) if a == b => format!("generation {a} is held back"),
        (Some(a), Some(b)) => format!("generations {a}-{b} are held back"),
        _ => "new generations will be held back".to_string(),
    };
    Paragraph::new(format!(" PINNED to generation {pinned}: {held} until the pin is released (u) "))
        .style(Style::new().fg(Color::White).bg(Color::Red).bold())
}

fn unreachable_panel(
    app: &App,
    e: &ClientError,
    failures: u32,
    last_ok: Option<Instant>,
    now: Now,
) -> Paragraph<'static> {
    let last = match last_ok {
        Some(t) => format!("the timeline below is from {} ago", short(now.instant.saturating_duration_since(t))),
        None => "no answer yet since ramjet-top started".to_string(),
    };
    let plural = if failures == 1 { "" } else { "s" };
    let text = vec![
        Line::from(Span::styled(e.to_string(), Style::new().fg(Color::Red))),
        Line::from(format!("retrying every {} ({failures} failed poll{plural}); {last}", short(app.interval))),
    ];
    let title = match e {
        ClientError::Unreachable { .. } => " daemon unreachable ",
        _ => " the daemon's answer is unusable ",
    };
    Paragraph::new(text)
        .wrap(Wrap { trim: true })
        .block(Block::new().borders(Borders::ALL).border_style(Style::new().fg(Color::Red)).title(title))
}

fn draw_traffic(frame: &mut Frame, app: &App, area: Rect) {
    let block = Block::new().borders(Borders::ALL).title(" traffic ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let [figures, errors, spark] =
        Layout::vertical([Constraint::Length(1), Constraint::Length(1), Constraint::Length(1)]).areas(inner);
    let t = &app.traffic;

    let mut line = vec![Span::raw("requests/s ")];
    match &t.rates {
        Some(r) => {
            line.push(Span::styled(format!("{:>8}", rate(r.requests_total)), Style::new().bold()));
            for (class, value) in &r.requests {
                if class == "1xx" && *value == 0.0 {
                    continue;
                }
                let style = match class.as_str() {
                    "5xx" if *value > 0.0 => Style::new().fg(Color::Red),
                    "4xx" if *value > 0.0 => Style::new().fg(Color::Yellow),
                    _ => Style::new(),
                };
                line.push(Span::raw(format!("   {class} ")));
                line.push(Span::styled(rate(*value), style));
            }
        }
        None => line.push(Span::styled("     n/a (needs two scrapes of /metrics)", Style::new().dim())),
    }
    frame.render_widget(Line::from(line), figures);

    let line = match (&t.error, t.latest()) {
        (Some(e), _) => Line::from(Span::styled(format!("/metrics: {e}"), Style::new().fg(Color::Red))),
        (None, Some(scrape)) => {
            let total = scrape.upstream_errors_total();
            let per_s = t.rates.as_ref().map(|r| r.upstream_errors).unwrap_or(0.0);
            let kinds: Vec<String> =
                scrape.upstream_errors.iter().filter(|(_, v)| **v > 0.0).map(|(k, v)| format!("{k} {v}")).collect();
            let detail = if kinds.is_empty() { String::new() } else { format!(": {}", kinds.join(", ")) };
            let style = if per_s > 0.0 { Style::new().fg(Color::Red) } else { Style::new() };
            let active = scrape.connections_active.map(|v| v.to_string()).unwrap_or_else(|| "?".into());
            Line::from(vec![
                Span::raw("upstream errors/s "),
                Span::styled(rate(per_s), style),
                Span::raw(format!(" (since start {total}{detail})   active connections {active}")),
            ])
        }
        (None, None) => Line::from(Span::styled("no scrape of /metrics yet", Style::new().dim())),
    };
    frame.render_widget(line, errors);

    // The sparkline: one bar per poll, newest on the right, scaled to the busiest poll shown.
    let peak_label = |peak: f64| format!("peak {:>6} req/s ", rate(peak));
    let [label, bars] =
        Layout::horizontal([Constraint::Length(peak_label(0.0).len() as u16), Constraint::Fill(1)]).areas(spark);
    let skip = t.history.len().saturating_sub(usize::from(bars.width));
    let shown: Vec<f64> = t.history.iter().skip(skip).copied().collect();
    if shown.is_empty() {
        return;
    }
    let peak = shown.iter().copied().fold(0.0, f64::max);
    frame.render_widget(Span::styled(peak_label(peak), Style::new().dim()), label);
    let data = shown.iter().map(|r| (r * 100.0).round() as u64);
    frame.render_widget(Sparkline::default().data(data).style(Style::new().fg(Color::Cyan)), bars);
}

/// The busiest routes and backends between the last two polls of `/admin/traffic`.
fn routes_panel(app: &App, rows: usize) -> Paragraph<'static> {
    let block = Block::new().borders(Borders::ALL).title(" routes (busiest first) ");
    let mut lines = vec![Line::from(Span::styled(
        format!("{:<28} {:<28} {:>9} {:>7} {:>8}", "route", "backend", "req/s", "5xx %", "p99 ≤"),
        Style::new().dim(),
    ))];
    for r in app.routes.rows.iter().take(rows) {
        let errors = r.error_ratio.map_or_else(|| "-".to_string(), |e| format!("{:.1}", e * 100.0));
        let p99 = match r.p99 {
            None => "-".to_string(),
            Some(b) if b.is_infinite() => "> 10s".to_string(),
            Some(b) if b < 1.0 => format!("{}ms", (b * 1000.0).round()),
            Some(b) => format!("{b}s"),
        };
        let style = if r.error_ratio.is_some_and(|e| e > 0.0) { Style::new().fg(Color::Red) } else { Style::new() };
        lines.push(Line::from(Span::styled(
            format!(
                "{:<28} {:<28} {:>9} {:>7} {:>8}",
                clip(&r.route, 28),
                clip(&r.backend, 28),
                rate(r.requests_per_s),
                errors,
                p99
            ),
            style,
        )));
    }
    Paragraph::new(lines).block(block)
}

/// `s` cut to `width` characters, with `…` where it was cut.
fn clip(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(width - 1).collect();
        out.push('…');
        out
    }
}

fn draw_timeline(frame: &mut Frame, app: &App, area: Rect, now: Now) {
    let stale = matches!(app.link, Link::Down { .. }) && app.snapshot.is_some();
    let title = if stale { " generations, newest first (stale) " } else { " generations, newest first " };
    let block = Block::new().borders(Borders::ALL).title(title);
    let Some(s) = &app.snapshot else {
        frame.render_widget(Paragraph::new(" no generations to show yet").block(block), area);
        return;
    };
    let rows = s.generations.iter().map(|g| {
        let (state, style) = state(g, s.pinned);
        Row::new(vec![
            Cell::from(format!("{:>5}", g.generation)),
            Cell::from(applied(&g.applied_at, now.wall)),
            Cell::from(state).style(style),
            Cell::from(format!("{:>6}", g.routes)),
            Cell::from(format!("{:>5}", g.hosts)),
            Cell::from(format!("{:>5}", g.certs)),
            Cell::from(g.summary.clone()),
        ])
    });
    let widths = [5, 19, 9, 6, 5, 5].map(Constraint::Length);
    let header = ["  gen", "applied", "state", "routes", "hosts", "certs", "change"];
    draw_selectable(frame, area, block, &header, rows, &widths, app.selected_index());
}

/// A table with a header, `widths` (the last column takes the rest), and `>` and reverse video on
/// the selected row, kept in view.
pub fn draw_selectable<'a>(
    frame: &mut Frame,
    area: Rect,
    block: Block<'a>,
    header: &[&'a str],
    rows: impl IntoIterator<Item = Row<'a>>,
    widths: &[Constraint],
    selected: Option<usize>,
) {
    let header = Row::new(header.iter().copied()).style(Style::new().bold().underlined());
    let widths = widths.iter().copied().chain([Constraint::Fill(1)]);
    let table = Table::new(rows, widths)
        .header(header)
        .block(block)
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .highlight_symbol("> ");
    let mut state = TableState::new().with_selected(selected);
    frame.render_stateful_widget(table, area, &mut state);
}

/// The state column: PINNED and serving are what an operator looks for first.
fn state(g: &GenerationInfo, pinned: Option<u64>) -> (&'static str, Style) {
    if g.serving && pinned == Some(g.generation) {
        ("PINNED", Style::new().fg(Color::Red).bold())
    } else if g.serving {
        ("serving", Style::new().fg(Color::Green).bold())
    } else if g.published {
        ("published", Style::new())
    } else {
        ("held back", Style::new().fg(Color::Yellow))
    }
}

fn details_panel(app: &App) -> Paragraph<'static> {
    let block = Block::new().borders(Borders::ALL).title(" selected ");
    let selected = app.snapshot.as_ref().zip(app.selected_index()).map(|(s, i)| &s.generations[i]);
    let Some(g) = selected else {
        return Paragraph::new("").block(block);
    };
    let mut lines = vec![Line::from(vec![
        Span::styled(format!("generation {}", g.generation), Style::new().bold()),
        Span::raw(format!("  digest {}  compiled {}  ", g.digest, g.compiled_at)),
        Span::raw(g.summary.clone()),
    ])];
    if g.diagnostics.is_empty() {
        lines.push(Line::from("no diagnostics".dim()));
    }
    for d in &g.diagnostics {
        let color = match d.severity {
            Severity::Error => Color::Red,
            Severity::Warning => Color::Yellow,
        };
        lines.push(Line::from(vec![
            Span::styled("! ", Style::new().fg(color).bold()),
            Span::raw(format!("{}: {}", d.object, d.message)),
        ]));
    }
    Paragraph::new(lines).wrap(Wrap { trim: true }).block(block)
}

/// Two rows, wrapped: the daemon's error messages are sentences.
pub fn message_line(message: Option<&Message>) -> Paragraph<'static> {
    let line = match message {
        Some(m) if m.error => Line::from(Span::styled(m.text.clone(), Style::new().fg(Color::Red).bold())),
        Some(m) => Line::from(Span::styled(m.text.clone(), Style::new().fg(Color::Green))),
        None => Line::default(),
    };
    Paragraph::new(line).wrap(Wrap { trim: true }).block(Block::new().padding(Padding::horizontal(1)))
}

/// The keys; `pin` says what `p` pins.
pub fn keys_line(read_only: bool, pin: &'static str) -> Line<'static> {
    let key = |k: &'static str| Span::styled(k, Style::new().bold().reversed());
    let mut spans = vec![Span::raw(" "), key("↑↓ j k"), Span::raw(" select  ")];
    if read_only {
        spans.push(Span::styled("pin and release are off (--read-only)  ", Style::new().dim()));
    } else {
        spans.extend([key("p"), Span::raw(format!(" {pin}  ")), key("u"), Span::raw(" release pin  ")]);
    }
    spans.extend([key("q"), Span::raw(" quit")]);
    Line::from(spans)
}

fn draw_confirm(frame: &mut Frame, app: &App, command: Command) {
    let snapshot = app.snapshot.as_ref();
    let (question, consequence) = match command {
        Command::Pin(n) => (
            format!("Pin generation {n}?"),
            format!(
                "Traffic moves to generation {n} now (serving: {}), and new generations are \
                 held back until the pin is released.",
                snapshot.map(|s| s.serving.to_string()).unwrap_or_else(|| "?".into())
            ),
        ),
        Command::Release => match snapshot.and_then(|s| s.pinned.map(|p| (p, s.newest))) {
            Some((p, newest)) => {
                (format!("Release the pin on generation {p}?"), format!("The newest generation, {newest}, will serve."))
            }
            None => (
                "Release the pin?".to_string(),
                "Nothing was pinned at the last poll; the daemon will say so.".to_string(),
            ),
        },
    };
    confirm_box(frame, &command.describe(), question, vec![consequence]);
}

/// The confirmation box, in the lower half of the screen so the rows above it, the selected one
/// included, stay visible: the question, what will happen, and the keys.
pub fn confirm_box(frame: &mut Frame, what: &str, question: String, consequence: Vec<String>) {
    // Borders, question, blank, consequence (wrapped at 70), blank, keys, and a spare row.
    let height = 7 + consequence.iter().map(|c| c.chars().count().div_ceil(70).max(1) as u16).sum::<u16>();
    let mut lines = vec![Line::from(Span::styled(question, Style::new().bold())), Line::from("")];
    lines.extend(consequence.into_iter().map(Line::from));
    lines.push(Line::from(""));
    lines.push(Line::from(vec![
        Span::styled(" y ", Style::new().bold().reversed()),
        Span::raw(" yes, send it    "),
        Span::styled(" n ", Style::new().bold().reversed()),
        Span::raw(" no (any other key cancels)"),
    ]));
    let text = Text::from(lines);
    let screen = frame.area();
    let lower = Rect { y: screen.y + screen.height / 2, height: screen.height - screen.height / 2, ..screen };
    let area = lower.centered(Constraint::Max(72), Constraint::Length(height));
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(text).wrap(Wrap { trim: true }).block(
            Block::new()
                .borders(Borders::ALL)
                .border_style(Style::new().fg(Color::Yellow))
                .title(format!(" confirm {what} ")),
        ),
        area,
    );
}

/// `06:40:12 (3m ago)` from an RFC 3339 time; the string itself if it does not parse.
pub fn applied(rfc3339: &str, now: SystemTime) -> String {
    let Ok(at) = humantime::parse_rfc3339(rfc3339) else {
        return rfc3339.to_string();
    };
    let clock = rfc3339.get(11..19).unwrap_or(rfc3339);
    match now.duration_since(at) {
        Ok(age) => format!("{clock} ({} ago)", short(age)),
        Err(_) => clock.to_string(),
    }
}

/// `0.4s`, `12s`, `3m`, `2h`, `4d`.
pub fn short(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..10 => format!("{:.1}s", d.as_secs_f64()),
        10..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

fn rate(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}
