//! SVG through Graphviz: `pomctl` draws DOT and pipes it to `dot -Tsvg`. Graphviz is not a
//! dependency of POM, so its absence is a clear error naming the program and the way around
//! it (`-o dot`), never a panic or an empty file.

use std::ffi::OsStr;
use std::io::Write as _;
use std::process::{Command, Stdio};

/// Why no SVG came out.
#[derive(Debug, thiserror::Error)]
pub enum SvgError {
    #[error(
        "-o svg needs Graphviz's `{program}` program, which is not on PATH: install Graphviz, \
         or use -o dot and render the DOT elsewhere (e.g. `dot -Tsvg graph.dot > graph.svg`)"
    )]
    Missing { program: String },
    #[error("running `{program} -Tsvg`: {source}")]
    Run {
        program: String,
        source: std::io::Error,
    },
    #[error("`{program} -Tsvg` failed ({status}): {stderr}")]
    Failed {
        program: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
}

/// Renders DOT text to SVG with `program` (normally `dot`).
///
/// # Errors
/// [`SvgError::Missing`] when the program cannot be started because it does not exist; the
/// others when it runs and fails.
pub fn render(dot_text: &str, program: &OsStr) -> Result<Vec<u8>, SvgError> {
    let name = program.to_string_lossy().into_owned();
    let mut child = match Command::new(program)
        .arg("-Tsvg")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(SvgError::Missing { program: name });
        }
        Err(source) => {
            return Err(SvgError::Run {
                program: name,
                source,
            });
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        // A write error shows up as the program's failure below.
        let _ = stdin.write_all(dot_text.as_bytes());
    }
    let output = child.wait_with_output().map_err(|source| SvgError::Run {
        program: name.clone(),
        source,
    })?;
    if !output.status.success() {
        return Err(SvgError::Failed {
            program: name,
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(output.stdout)
}
