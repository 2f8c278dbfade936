//! Splitting normalised text into sentences and clauses at punctuation.

/// A clause: words said without a pause, and the punctuation that ends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    /// The words, trimmed, without the closing punctuation.
    pub text: String,
    /// The punctuation that closed the clause (`, ; : — … . ! ?`), if any.
    pub punct: Option<char>,
}

/// A sentence: clauses up to a `.`, `!` or `?` (or the end of the text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sentence {
    /// Its clauses, in order; never empty.
    pub clauses: Vec<Clause>,
}

/// How strongly a punctuation mark separates; the strongest of a run wins
/// (`"word,."` ends a sentence, `"?!"` is a question).
fn strength(c: char) -> Option<u8> {
    match c {
        '?' => Some(6),
        '!' => Some(5),
        '.' => Some(4),
        ';' | ':' => Some(3),
        '…' | '—' => Some(2),
        ',' => Some(1),
        _ => None,
    }
}

fn ends_sentence(c: char) -> bool {
    matches!(c, '.' | '!' | '?')
}

/// Split `text` (already normalised) into sentences of clauses.
///
/// A `.` inside a word (`U.S.A`) is not a boundary; clauses with no letters
/// or digits are skipped, their punctuation merged into the clause before.
pub fn split(text: &str) -> Vec<Sentence> {
    let chars: Vec<char> = text.chars().collect();
    let mut sentences = Vec::new();
    let mut clauses: Vec<Clause> = Vec::new();
    let mut current = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let boundary = match c {
            // "U.S.A", "e.g": a period followed by a letter stays in the word.
            '.' => !chars.get(i + 1).is_some_and(|n| n.is_alphanumeric()),
            c => strength(c).is_some(),
        };
        if !boundary {
            current.push(c);
            i += 1;
            continue;
        }
        // Take the whole run of punctuation (and spaces between it).
        let mut best = c;
        let mut j = i + 1;
        while let Some(&n) = chars.get(j) {
            match strength(n) {
                Some(s) if strength(best).is_some_and(|b| s > b) => best = n,
                Some(_) => {}
                None if n == ' ' => {}
                None => break,
            }
            j += 1;
        }
        push_clause(&mut clauses, &current, Some(best));
        current.clear();
        if ends_sentence(best) && !clauses.is_empty() {
            sentences.push(Sentence {
                clauses: std::mem::take(&mut clauses),
            });
        }
        i = j;
    }
    push_clause(&mut clauses, &current, None);
    if !clauses.is_empty() {
        sentences.push(Sentence { clauses });
    }
    sentences
}

fn push_clause(clauses: &mut Vec<Clause>, text: &str, punct: Option<char>) {
    let text = text.trim();
    if text.chars().any(char::is_alphanumeric) {
        clauses.push(Clause {
            text: text.to_string(),
            punct,
        });
    } else if let (Some(last), Some(p)) = (clauses.last_mut(), punct) {
        // "word, (…)." : the stronger mark closes the clause before.
        if strength(p) > last.punct.and_then(strength) {
            last.punct = Some(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(text: &str) -> Vec<Vec<(String, Option<char>)>> {
        split(text)
            .into_iter()
            .map(|s| s.clauses.into_iter().map(|c| (c.text, c.punct)).collect())
            .collect()
    }

    fn c(t: &str, p: Option<char>) -> (String, Option<char>) {
        (t.to_string(), p)
    }

    #[test]
    fn sentences_and_clauses() {
        assert_eq!(
            shape("Open the pod bay doors, please. I am afraid I can't do that."),
            vec![
                vec![
                    c("Open the pod bay doors", Some(',')),
                    c("please", Some('.'))
                ],
                vec![c("I am afraid I can't do that", Some('.'))],
            ]
        );
        assert_eq!(
            shape("Really?! Yes; well — maybe… ok"),
            vec![
                vec![c("Really", Some('?'))],
                vec![
                    c("Yes", Some(';')),
                    c("well", Some('—')),
                    c("maybe", Some('…')),
                    c("ok", None)
                ],
            ]
        );
        assert_eq!(
            shape("The U.S.A is big, ."),
            vec![vec![c("The U.S.A is big", Some('.'))]]
        );
        assert_eq!(shape(" ,.!  "), Vec::<Vec<(String, Option<char>)>>::new());
        assert_eq!(
            shape("one,two"),
            vec![vec![c("one", Some(',')), c("two", None)]]
        );
    }
}
