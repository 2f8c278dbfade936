//! Phonemization with the `espeak-ng` program (en-us, IPA), one clause per line.
//!
//! Running the binary (rather than linking libespeak-ng) keeps the build free
//! of C dependencies and matches how the fixtures were made:
//! `espeak-ng -q --ipa -v en-us`.

use super::error::FrontendError;
use std::io::Write;
use std::process::{Command, Stdio};

/// Turns clauses (no clause punctuation inside) into IPA phoneme strings.
pub trait Phonemizer {
    /// One phoneme string per clause, in order (words separated by spaces).
    fn phonemize(&self, clauses: &[&str]) -> Result<Vec<String>, FrontendError>;
}

/// Input bytes per espeak-ng run: its output (about the same size) then
/// stays well under a pipe buffer, so writing all input before reading
/// cannot deadlock and no helper thread is needed.
const BATCH_BYTES: usize = 8 * 1024;

/// The `espeak-ng` program as a [`Phonemizer`].
#[derive(Debug, Clone)]
pub struct EspeakNg {
    program: String,
    voice: String,
}

impl Default for EspeakNg {
    fn default() -> Self {
        Self {
            program: "espeak-ng".into(),
            voice: "en-us".into(),
        }
    }
}

impl EspeakNg {
    /// `espeak-ng` from `PATH`, voice `en-us`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Use another program (a path, or a name looked up in `PATH`).
    pub fn program(mut self, program: impl Into<String>) -> Self {
        self.program = program.into();
        self
    }

    /// Use another espeak-ng voice (`en-gb`, ...).
    pub fn voice(mut self, voice: impl Into<String>) -> Self {
        self.voice = voice.into();
        self
    }

    /// Run espeak-ng on `input` (lines) and return its output lines.
    fn run(&self, input: &str) -> Result<Vec<String>, FrontendError> {
        let mut child = Command::new(&self.program)
            .args(["-q", "--ipa", "-b", "1", "-v", &self.voice])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| FrontendError::EspeakMissing {
                program: self.program.clone(),
                detail: e.to_string(),
            })?;
        let written = child
            .stdin
            .take()
            .map(|mut stdin| stdin.write_all(input.as_bytes()));
        let out = child
            .wait_with_output()
            .map_err(|e| FrontendError::EspeakFailed {
                status: "did not finish".into(),
                stderr: e.to_string(),
            })?;
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if !out.status.success() {
            return Err(FrontendError::EspeakFailed {
                status: out.status.to_string(),
                stderr,
            });
        }
        if let Some(Err(e)) = written {
            return Err(FrontendError::EspeakFailed {
                status: "closed its input early".into(),
                stderr: format!("{e}; {stderr}"),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(clean_line)
            .collect())
    }

    /// Phonemize one batch: one run with a line per clause; when espeak-ng
    /// splits or merges lines (it breaks very long clauses), one run per clause.
    fn batch(&self, clauses: &[&str]) -> Result<Vec<String>, FrontendError> {
        let input: String = clauses
            .iter()
            .map(|c| format!("{}\n", one_line(c)))
            .collect();
        let lines = self.run(&input)?;
        if lines.len() == clauses.len() {
            return Ok(lines);
        }
        clauses
            .iter()
            .map(|c| {
                let lines = self.run(&format!("{}\n", one_line(c)))?;
                Ok(join_words(lines.iter().map(String::as_str)))
            })
            .collect()
    }
}

impl Phonemizer for EspeakNg {
    fn phonemize(&self, clauses: &[&str]) -> Result<Vec<String>, FrontendError> {
        let mut out = Vec::with_capacity(clauses.len());
        let mut start = 0;
        while start < clauses.len() {
            let mut end = start;
            let mut bytes = 0;
            while end < clauses.len() && (end == start || bytes + clauses[end].len() < BATCH_BYTES)
            {
                bytes += clauses[end].len() + 1;
                end += 1;
            }
            out.extend(self.batch(&clauses[start..end])?);
            start = end;
        }
        Ok(out)
    }
}

/// A clause as one input line (a newline inside would split it).
fn one_line(clause: &str) -> String {
    clause.replace(['\n', '\r'], " ")
}

/// Join phoneme pieces with single spaces, skipping empty ones.
pub fn join_words<'a>(pieces: impl Iterator<Item = &'a str>) -> String {
    pieces
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// An output line without espeak-ng's language-switch flags (`(fr)`, `(en)`):
/// their letters would otherwise be read as phonemes.
fn clean_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(open) = rest.find('(') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find(')') {
            Some(close)
                if close > 0
                    && after[..close]
                        .chars()
                        .all(|c| c.is_ascii_alphabetic() || c == '-') =>
            {
                rest = &after[close + 1..];
            }
            _ => {
                out.push('(');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    join_words(out.split(' '))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_flags_are_removed() {
        assert_eq!(clean_line("(fr)kafe(en) ˌoʊ lˈeɪ"), "kafe ˌoʊ lˈeɪ");
        assert_eq!(clean_line(" a  b "), "a b");
        assert_eq!(clean_line("(x y) z"), "(x y) z");
    }

    #[test]
    fn missing_program_is_typed() {
        let e = EspeakNg::new()
            .program("/nonexistent/espeak-ng")
            .phonemize(&["hello"])
            .unwrap_err();
        assert!(matches!(e, FrontendError::EspeakMissing { .. }), "{e}");
        assert!(e.to_string().contains("install"), "{e}");
    }
}
