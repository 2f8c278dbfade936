//! Phonemization with espeak-ng (en-us, IPA): in process through
//! libespeak-ng when it loads ([`super::espeak_lib`]), else the `espeak-ng`
//! program with one clause per line. Both give what made the fixtures:
//! `espeak-ng -q --ipa -v en-us`. Neither is linked at build time, so the
//! build stays free of C dependencies.

use super::error::FrontendError;
use super::espeak_lib;
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

/// espeak-ng as a [`Phonemizer`].
#[derive(Debug, Clone)]
pub struct EspeakNg {
    program: String,
    voice: String,
    /// Try libespeak-ng in process before the program.
    library: bool,
}

impl Default for EspeakNg {
    fn default() -> Self {
        Self {
            program: "espeak-ng".into(),
            voice: "en-us".into(),
            library: true,
        }
    }
}

impl EspeakNg {
    /// libespeak-ng in process when it loads, else `espeak-ng` from `PATH`; voice `en-us`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Use this program (a path, or a name looked up in `PATH`), never the library.
    pub fn program(mut self, program: impl Into<String>) -> Self {
        self.program = program.into();
        self.library = false;
        self
    }

    /// Whether phonemes come from libespeak-ng in process (else the program).
    pub fn in_process(&self) -> bool {
        self.library && espeak_lib::available()
    }

    /// One clause through the library: its pieces (the library may split a
    /// long clause) joined as the program's lines are.
    fn library_clause(&self, clause: &str) -> Result<String, FrontendError> {
        let pieces = espeak_lib::phonemize(&one_line(clause), &self.voice)?;
        let cleaned: Vec<String> = pieces.iter().map(|p| clean_line(p)).collect();
        Ok(join_words(cleaned.iter().map(String::as_str)))
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
        if self.in_process() {
            return clauses.iter().map(|c| self.library_clause(c)).collect();
        }
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
    fn library_and_program_give_the_same_phonemes() {
        let lib = EspeakNg::new();
        if !lib.in_process() {
            eprintln!("libespeak-ng is not installed: nothing to compare");
            return;
        }
        let program = EspeakNg::new().program("espeak-ng");
        let clauses = [
            "Please call Stella and ask her to bring these things",
            "In 1999 Dr Smith paid three dollars for twelve eggs",
            "Mr O'Neil's dog can't swim",
            "I read the book yesterday and I will read it again",
        ];
        match program.phonemize(&clauses) {
            Ok(want) => assert_eq!(lib.phonemize(&clauses).unwrap(), want),
            Err(e) => eprintln!("the espeak-ng program is missing ({e}): nothing to compare"),
        }
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
