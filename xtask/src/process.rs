//! Running external commands with clear errors.

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::Result;

/// Describes a command for error messages.
pub fn describe(command: &Command) -> String {
    let mut text = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}

/// Runs `command` with inherited stdio; fails unless it exits 0.
pub fn run(command: &mut Command) -> Result {
    let status = command.status().map_err(|e| format!("cannot run {}: {e}", describe(command)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} failed ({status})", describe(command)))
    }
}

/// Runs `command`, capturing output; fails (with its stderr) unless it exits 0.
pub fn output(command: &mut Command) -> Result<String> {
    let out = capture(command)?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{} failed ({}): {}", describe(command), out.status, String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// Runs `command` capturing stdout and stderr, whatever its exit status.
pub fn capture(command: &mut Command) -> Result<Output> {
    command.output().map_err(|e| format!("cannot run {}: {e}", describe(command)))
}

/// Runs `command` with `input` on its stdin; fails unless it exits 0.
pub fn run_with_input(command: &mut Command, input: &[u8]) -> Result {
    let mut child =
        command.stdin(Stdio::piped()).spawn().map_err(|e| format!("cannot run {}: {e}", describe(command)))?;
    let mut stdin = child.stdin.take().expect("stdin was piped");
    stdin.write_all(input).map_err(|e| format!("writing to {}: {e}", describe(command)))?;
    drop(stdin);
    let status = child.wait().map_err(|e| format!("waiting for {}: {e}", describe(command)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} failed ({status})", describe(command)))
    }
}

/// Whether `program` is found on `PATH`.
pub fn on_path(program: impl AsRef<OsStr>) -> bool {
    let program = program.as_ref();
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// A command that runs as the `postgres` user (clusters refuse to run as root), in `cwd`.
pub fn as_postgres(program: impl AsRef<OsStr>, cwd: &Path) -> Command {
    let mut command = Command::new("runuser");
    command.args(["-u", "postgres", "--"]).arg(program).current_dir(cwd);
    command
}
