//! Drawing the fleet view: a pure function of [`FleetApp`] and the clock, like the single view.
//!
//! From the top: the title line (the name, how many replicas answer), the serving line (the table
//! most replicas serve, how many differ, how many are pinned), the name's lookup error if the last
//! lookup failed, one row per replica, the tables across the fleet (newest first, one selected),
//! every replica's answer to the last command, and the message and key lines. A confirmation asks in
//! a box over the middle, with the counts of what will change.

use std::net::SocketAddr;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Wrap};
use ratatui::Frame;

use super::{applied, confirm_box, draw_selectable, keys_line, message_line, short, take, title, Now};
use crate::app::fleet::{FleetApp, Plan, Replica};
use crate::app::Describe;
use crate::client::ClientError;
use crate::model::PinAnswer;
use crate::worker::FleetCommand;

pub fn draw(frame: &mut Frame, app: &FleetApp, now: Now) {
    let width = usize::from(frame.area().width.saturating_sub(2)).max(1);
    let results = app.results.as_ref().map_or(0, |(_, r)| {
        2 + r.iter().map(|(addr, a)| result_text(*addr, a).chars().count().div_ceil(width) as u16).sum::<u16>()
    });
    // As in the single view, rows go in order of importance: the replicas and the keys first.
    let mut rows = frame.area().height;
    let rest = &mut rows;
    let title_h = take(rest, 1);
    let keys_h = take(rest, 1);
    let serving_h = take(rest, 1);
    let message_h = take(rest, 2);
    let lookup_h = take(rest, u16::from(app.lookup_error.is_some()));
    // The tables keep a few rows however many replicas there are: selecting one is the point.
    let tables_min = take(rest, 5);
    let replicas_h = take(rest, app.replicas.len().max(1) as u16 + 3);
    let results_h = take(rest, results);
    let tables_h = tables_min + take(rest, u16::MAX);
    let [title_a, serving_a, lookup_a, replicas_a, tables_a, results_a, message_a, keys_a] = Layout::vertical(
        [title_h, serving_h, lookup_h, replicas_h, tables_h, results_h, message_h, keys_h].map(Constraint::Length),
    )
    .areas(frame.area());

    frame.render_widget(title_line(app, now), title_a);
    frame.render_widget(serving_line(app), serving_a);
    if let Some(e) = &app.lookup_error {
        let text = format!(" {e}; asking the {} addresses of the last lookup that worked", app.replicas.len());
        frame.render_widget(Line::from(Span::styled(text, Style::new().fg(Color::Red))), lookup_a);
    }
    frame.render_widget(replicas_table(app, replicas_a.height), replicas_a);
    draw_tables(frame, app, tables_a, now);
    frame.render_widget(results_panel(app), results_a);
    frame.render_widget(message_line(app.controls.message.as_ref()), message_a);
    frame.render_widget(keys_line(app.controls.read_only, "pin selected table on every replica"), keys_a);
    if let Some(command) = &app.controls.confirm {
        let (question, consequence) = confirmation(command, app.plan(command));
        confirm_box(frame, &command.describe(), question, consequence);
    }
}

fn title_line(app: &FleetApp, now: Now) -> Line<'static> {
    let answering = app.replicas.iter().filter(|r| r.status.is_ok()).count();
    let total = app.replicas.len();
    let state = match app.polled {
        None => Span::styled(" connecting ", Style::new().fg(Color::Black).bg(Color::Yellow)),
        Some(at) => {
            let ago = short(now.instant.saturating_duration_since(at));
            let text = format!(" {answering} of {total} replicas answer · polled {ago} ago ");
            if answering == total {
                Span::styled(text, Style::new().fg(Color::Black).bg(Color::Green))
            } else {
                Span::styled(text, Style::new().fg(Color::White).bg(Color::Red).bold())
            }
        }
    };
    title(&format!("fleet {}", app.name), state, app.controls.read_only)
}

fn serving_line(app: &FleetApp) -> Line<'static> {
    let Some(common) = app.majority() else {
        return Line::from(" waiting for the replicas' first answers...".dim());
    };
    let on = app.replicas.iter().filter(|r| r.serving_digest() == Some(common)).count();
    let differ = app.replicas.iter().filter(|r| app.differs(r)).count();
    let pinned = app.replicas.iter().filter(|r| r.status.as_ref().is_ok_and(|g| g.pinned.is_some())).count();
    let mut spans = vec![
        Span::raw(" most common table "),
        Span::styled(common.to_string(), Style::new().bold().fg(Color::Green)),
        Span::raw(format!(" (serving on {on} of {})", app.replicas.len())),
    ];
    if differ > 0 {
        spans.push(Span::styled(format!(" · {differ} DIFFER"), Style::new().fg(Color::Yellow).bold()));
    }
    spans.push(match pinned {
        0 => Span::raw(" · none pinned"),
        n => Span::styled(format!(" · {n} PINNED"), Style::new().fg(Color::Red).bold()),
    });
    Line::from(spans)
}

/// One line per replica, in columns; a replica that did not answer has the error instead, as long
/// as the line allows (a table's columns would cut it short). When there are more replicas than
/// rows, the last row counts the rest, and how many of them need a look.
fn replicas_table(app: &FleetApp, height: u16) -> Paragraph<'static> {
    let header = format!(
        "{:<21} {:>7} {:<12} {:<10} {:>6} {:<12} note",
        "replica", "serving", "digest", "pin", "newest", "newest digest"
    );
    let mut lines = vec![Line::from(Span::styled(header, Style::new().bold().underlined()))];
    let rows = usize::from(height.saturating_sub(3));
    let shown = if app.replicas.len() > rows { rows.saturating_sub(1) } else { rows };
    lines.extend(app.replicas.iter().take(shown).map(|r| replica_line(app, r)));
    let hidden = &app.replicas[shown.min(app.replicas.len())..];
    if !hidden.is_empty() {
        let silent = hidden.iter().filter(|r| r.status.is_err()).count();
        let differ = hidden.iter().filter(|r| app.differs(r)).count();
        let text = format!(
            "... {} more replicas below (a taller terminal shows them): {silent} do not answer, {differ} differ",
            hidden.len()
        );
        let style = if silent + differ > 0 { Style::new().fg(Color::Yellow).bold() } else { Style::new().dim() };
        lines.push(Line::from(Span::styled(text, style)));
    }
    Paragraph::new(lines).block(Block::new().borders(Borders::ALL).title(" replicas "))
}

fn replica_line(app: &FleetApp, r: &Replica) -> Line<'static> {
    let addr = format!("{:<21} ", r.addr.to_string());
    let g = match &r.status {
        Ok(g) => g,
        Err(e) => {
            let why = match e {
                ClientError::Unreachable { reason, .. } => format!("UNREACHABLE: {reason}"),
                other => format!("ERROR: {other}"),
            };
            return Line::from(vec![Span::raw(addr), Span::styled(why, Style::new().fg(Color::Red).bold())]);
        }
    };
    let pin = match g.pinned {
        Some(_) => Span::styled(format!("{:<10}", "PINNED"), Style::new().fg(Color::Red).bold()),
        None => Span::raw(format!("{:<10}", "not pinned")),
    };
    let differs = app.differs(r);
    let style = if differs { Style::new().fg(Color::Yellow) } else { Style::new() };
    let serving = format!("{:>7} {:<12} ", g.serving, r.serving_digest().unwrap_or("?"));
    let newest = format!(" {:>6} {:<13} ", g.newest, r.newest_digest().unwrap_or("?"));
    let mut spans = vec![Span::styled(addr, style), Span::styled(serving, style), pin, Span::styled(newest, style)];
    if differs {
        spans.push(Span::styled("DIFFERS from most", style.bold()));
    }
    Line::from(spans)
}

fn draw_tables(frame: &mut Frame, app: &FleetApp, area: Rect, now: Now) {
    let block = Block::new().borders(Borders::ALL).title(" tables across the fleet, newest first ");
    let tables = app.tables();
    if tables.is_empty() {
        frame.render_widget(Paragraph::new(" no replica has listed a generation yet").block(block), area);
        return;
    }
    let total = app.replicas.len();
    let rows = tables.iter().map(|t| {
        let numbers: Vec<String> =
            t.generations.iter().map(|n| n.map_or_else(|| "-".to_string(), |n| n.to_string())).collect();
        let serving = Cell::from(format!("{} of {total}", t.serving));
        Row::new(vec![
            Cell::from(t.digest.clone()),
            Cell::from(applied(&t.compiled_at, now.wall)),
            if t.serving > 0 { serving.style(Style::new().fg(Color::Green).bold()) } else { serving },
            Cell::from(numbers.join(" ")),
            Cell::from(t.summary.clone()),
        ])
    });
    let widths = [12, 19, 10, 22].map(Constraint::Length);
    let header = ["digest", "compiled", "serving on", "generation per replica", "change"];
    draw_selectable(frame, area, block, &header, rows, &widths, app.selected_index(&tables));
}

/// Every replica's answer to the last command: which did it, which failed and why.
fn results_panel(app: &FleetApp) -> Paragraph<'static> {
    let Some((command, results)) = &app.results else {
        return Paragraph::new("");
    };
    let lines: Vec<Line> = results
        .iter()
        .map(|(addr, result)| {
            let color = if result.is_ok() { Color::Green } else { Color::Red };
            Line::from(Span::styled(result_text(*addr, result), Style::new().fg(color)))
        })
        .collect();
    Paragraph::new(lines)
        .wrap(Wrap { trim: true })
        .block(Block::new().borders(Borders::ALL).title(format!(" last command: {} ", command.describe())))
}

/// `ADDR  ok: <the daemon's answer>` or `ADDR  FAILED: <why>`.
fn result_text(addr: SocketAddr, result: &Result<PinAnswer, ClientError>) -> String {
    match result {
        Ok(answer) => format!("{addr}  ok: {}", answer.message),
        Err(e) => format!("{addr}  FAILED: {e}"),
    }
}

/// The question and what will happen, a line each, from the counts of the last poll.
fn confirmation(command: &FleetCommand, plan: Plan) -> (String, Vec<String>) {
    let n = plan.replicas;
    let (question, change, already, other) = match command {
        FleetCommand::Pin(digest) => (
            format!("Pin table {digest} on all {n} replicas?"),
            "their traffic moves to this table now, and new generations are held back until the pin is released",
            "Already serving it (pinned to it too)",
            "Not holding it in their history (they will refuse)",
        ),
        FleetCommand::Release => (
            format!("Release the pin on all {n} replicas?"),
            "each moves to its newest generation",
            "Pinned to their newest table (only the pin goes)",
            "Not pinned (nothing changes there)",
        ),
    };
    let mut lines = vec![format!("{} of {n} replicas will change: {change}.", plan.change)];
    for (count, what) in [
        (plan.already, already),
        (plan.other, other),
        (plan.silent, "Did not answer the last poll (asked all the same)"),
    ] {
        if count > 0 {
            lines.push(format!("{what}: {count}"));
        }
    }
    (question, lines)
}
