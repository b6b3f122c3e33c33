//! The pseudo-terminal harness for the `ramjet-top` tests: the real binary in a pty, its screen
//! read through a terminal emulator (vt100). Every wait polls the screen until the text appears,
//! with a generous deadline, so the tests hold on a loaded 2-core machine.

use std::io::{Read, Write};
use std::num::NonZeroU16;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};

/// How long a screen may take to show what a test waits for.
pub const DEADLINE: Duration = Duration::from_secs(60);
pub const ROWS: u16 = 30;
pub const COLS: u16 = 110;

/// `ramjet-top` running in a pseudo-terminal.
pub struct Top {
    child: Box<dyn Child + Send + Sync>,
    screen: Arc<Mutex<vt100::Parser>>,
    keys: Box<dyn Write + Send>,
    _master: Box<dyn MasterPty + Send>,
}

impl Top {
    /// Starts `ramjet-top ARGS...` (`--interval 200ms` unless ARGS say otherwise) with `env` set,
    /// and no `RAMJET_TOP_*` variable inherited from the test's own environment.
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> Top {
        let pty = native_pty_system()
            .openpty(PtySize { rows: ROWS, cols: COLS, pixel_width: 0, pixel_height: 0 })
            .expect("a pseudo-terminal");
        let mut command = CommandBuilder::new(env!("CARGO_BIN_EXE_ramjet-top"));
        if !args.contains(&"--interval") {
            command.args(["--interval", "200ms"]);
        }
        command.args(args);
        for var in [
            "RAMJET_TOP_TOKEN_FILE",
            "RAMJET_TOP_ADMIN",
            "RAMJET_TOP_INTERVAL",
            "RAMJET_TOP_READ_ONLY",
            "RAMJET_TOP_FLEET",
        ] {
            command.env_remove(var);
        }
        command.env("TERM", "xterm-256color");
        for (k, v) in env {
            command.env(k, v);
        }
        let child = pty.slave.spawn_command(command).expect("ramjet-top starts");
        drop(pty.slave);
        let screen =
            Arc::new(Mutex::new(vt100::Parser::new(NonZeroU16::new(ROWS).unwrap(), NonZeroU16::new(COLS).unwrap(), 0)));
        let mut output = pty.master.try_clone_reader().unwrap();
        let parser = screen.clone();
        thread::spawn(move || {
            let mut buf = [0u8; 8192];
            // Ends with an error (EIO) or 0 once ramjet-top exits and the terminal closes.
            while let Ok(n @ 1..) = output.read(&mut buf) {
                parser.lock().unwrap().process(&buf[..n]);
            }
        });
        let keys = pty.master.take_writer().unwrap();
        Top { child, screen, keys, _master: pty.master }
    }

    pub fn text(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    /// Waits until the screen shows `text` (on one row, or wrapped over several), and returns the
    /// screen.
    pub fn wait_for(&mut self, text: &str) -> String {
        self.wait_until(&format!("the screen shows {text:?}"), |s| {
            s.contains(text) || s.lines().map(str::trim).collect::<Vec<_>>().join(" ").contains(text)
        })
    }

    pub fn wait_until(&mut self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let screen = self.text();
            if done(&screen) {
                return screen;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("ramjet-top exited ({status:?}) before {what}; the screen:\n{screen}");
            }
            assert!(Instant::now() < deadline, "timed out waiting until {what}; the screen:\n{screen}");
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// With `--read-only`: the keys line says so, and `p` and `u` are refused without asking
    /// (`question` starts the pin confirmation, which must not appear); the `y` pressed after each
    /// must find nothing to confirm.
    pub fn refuses_pin_and_release(&mut self, question: &str) {
        self.wait_for("pin and release are off (--read-only)");
        for key in ["p", "u"] {
            self.press(key);
            let screen =
                self.wait_for("read-only: ramjet-top was started with --read-only, so pin and release are refused");
            assert!(!screen.contains(question) && !screen.contains("Release the pin"), "{screen}");
            self.press("y");
        }
    }

    pub fn press(&mut self, keys: &str) {
        self.keys.write_all(keys.as_bytes()).unwrap();
        self.keys.flush().unwrap();
    }

    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Presses `q` and waits for a clean exit with the terminal given back.
    pub fn quit(mut self) {
        self.press("q");
        let deadline = Instant::now() + DEADLINE;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "ramjet-top did not quit on q:\n{}", self.text());
            thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "ramjet-top exited with {status:?}");
        let deadline = Instant::now() + DEADLINE;
        while self.screen.lock().unwrap().screen().alternate_screen() {
            assert!(Instant::now() < deadline, "ramjet-top left the terminal on the alternate screen");
            thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Top {
    fn drop(&mut self) {
        if self.running() {
            // SIGHUP, as when the terminal goes away.
            if self.child.kill().is_ok() {
                let _ = self.child.wait();
            }
        }
    }
}

/// A file holding `token` (and a newline, as a Secret often has), in a directory of this test
/// process named `dir`.
pub fn token_file(dir: &str, token: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ramjet-top-{}-{dir}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("token");
    std::fs::write(&path, format!("{token}\n")).unwrap();
    path
}
