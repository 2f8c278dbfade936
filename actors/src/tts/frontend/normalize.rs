//! Text normalisation before phonemization: whitespace, quotes and dashes,
//! common abbreviations, and numbers spelled out as words.
//!
//! espeak-ng reads digits itself, but reads `1984` as "nineteen hundred
//! eighty four" and splits clauses on the `.` and `,` inside `3.14` and
//! `1,000`; spelling numbers out first keeps clause splitting simple.

use super::numbers;

/// Normalise `text` for phonemization (see the module doc).
pub fn normalize(text: &str) -> String {
    let text = map_chars(text);
    let text = expand_abbreviations(&text);
    let text = expand_numbers(&text);
    collapse_spaces(&text)
}

/// Whitespace to spaces, typographic quotes to plain ones, dashes and dots to
/// the vocab's `—` and `…`, brackets to commas (a parenthesis is a pause).
fn map_chars(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let digit_at = |i: usize| chars.get(i).is_some_and(|c| c.is_ascii_digit());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => out.push(' '),
            c if c.is_control() => {}
            '‘' | '’' | '‚' | '‛' | '′' | '`' | '´' => out.push('\''),
            // Double quotes change nothing in how a sentence is said.
            '"' | '“' | '”' | '„' | '‟' | '«' | '»' | '″' => out.push(' '),
            '(' | ')' | '[' | ']' | '{' | '}' => out.push_str(", "),
            '−' => out.push('-'),
            // A dash between digits is a range: "1990–1995" → "1990 to 1995".
            '–' | '—' | '―' if i > 0 && digit_at(i - 1) && digit_at(i + 1) => {
                out.push_str(" to ")
            }
            '–' | '—' | '―' => out.push_str(" — "),
            '-' if chars.get(i + 1) == Some(&'-') => {
                while chars.get(i + 1) == Some(&'-') {
                    i += 1;
                }
                out.push_str(" — ");
            }
            // A hyphen with spaces around it is a dash.
            '-' if i > 0 && chars[i - 1] == ' ' && chars.get(i + 1) == Some(&' ') => out.push('—'),
            '.' if chars.get(i + 1) == Some(&'.') && chars.get(i + 2) == Some(&'.') => {
                while chars.get(i + 1) == Some(&'.') {
                    i += 1;
                }
                out.push('…');
            }
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// An abbreviation and what is said; a `leading` one (a title, `e.g.`)
/// always has something after it, so its period never ends a sentence.
struct Abbreviation {
    written: &'static str,
    said: &'static str,
    leading: bool,
}

const fn abbr(written: &'static str, said: &'static str, leading: bool) -> Abbreviation {
    Abbreviation {
        written,
        said,
        leading,
    }
}

const ABBREVIATIONS: &[Abbreviation] = &[
    abbr("Mr.", "Mister", true),
    abbr("Mrs.", "Missus", true),
    abbr("Ms.", "Miz", true),
    abbr("Dr.", "Doctor", true),
    abbr("Prof.", "Professor", true),
    abbr("St.", "Saint", true),
    abbr("Mt.", "Mount", true),
    abbr("Capt.", "Captain", true),
    abbr("Gen.", "General", true),
    abbr("Sgt.", "Sergeant", true),
    abbr("Lt.", "Lieutenant", true),
    abbr("Col.", "Colonel", true),
    abbr("Rev.", "Reverend", true),
    abbr("Gov.", "Governor", true),
    abbr("Sen.", "Senator", true),
    abbr("Jr.", "Junior", false),
    abbr("Sr.", "Senior", false),
    abbr("etc.", "et cetera", false),
    abbr("vs.", "versus", true),
    abbr("e.g.", "for example", true),
    abbr("i.e.", "that is", true),
    abbr("approx.", "approximately", true),
    abbr("Inc.", "Incorporated", false),
    abbr("Ltd.", "Limited", false),
    abbr("Corp.", "Corporation", false),
    abbr("Ave.", "Avenue", false),
    abbr("Blvd.", "Boulevard", false),
    abbr("Dept.", "Department", false),
    abbr("a.m.", "AM", false),
    abbr("p.m.", "PM", false),
];

/// Expand [`ABBREVIATIONS`] and `No.` before a number; an expanded
/// abbreviation that is not leading and ended a sentence keeps its period.
fn expand_abbreviations(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    let mut prev: Option<char> = None;
    'scan: while let Some(c) = rest.chars().next() {
        let at_word_start = prev.is_none_or(|p| !p.is_alphanumeric() && p != '.' && p != '\'');
        if at_word_start {
            for a in ABBREVIATIONS {
                let Some(after) = rest.strip_prefix(a.written) else {
                    continue;
                };
                if after.chars().next().is_some_and(char::is_alphanumeric) {
                    continue;
                }
                out.push_str(a.said);
                if !a.leading && ends_sentence(after) {
                    out.push('.');
                }
                prev = a.said.chars().last();
                rest = after;
                continue 'scan;
            }
            if let Some(after) = rest.strip_prefix("No.") {
                if after.trim_start().starts_with(|c: char| c.is_ascii_digit()) {
                    out.push_str("number");
                    prev = Some('r');
                    rest = after;
                    continue 'scan;
                }
            }
        }
        out.push(c);
        prev = Some(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Whether what follows an abbreviation's period starts a new sentence.
fn ends_sentence(after: &str) -> bool {
    let next = after.trim_start().chars().next();
    next.is_none_or(char::is_uppercase)
}

/// Spell out every run of digits (see [`spell_number`]).
fn expand_numbers(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 32);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let starts_number = c.is_ascii_digit()
            || (matches!(c, '$' | '£' | '€' | '-')
                && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())
                && (c != '-' || i == 0 || matches!(chars[i - 1], ' ' | ',')));
        if !starts_number {
            out.push(c);
            i += 1;
            continue;
        }
        let (words, next) = spell_number(&chars, i);
        // Keep the words apart from letters they touched ("mp3" → "mp three").
        if out.chars().last().is_some_and(char::is_alphanumeric) {
            out.push(' ');
        }
        out.push_str(&words);
        if chars.get(next).is_some_and(|c| c.is_alphanumeric()) {
            out.push(' ');
        }
        i = next;
    }
    out
}

/// Words for the number starting at `chars[start]` (an optional currency sign
/// or minus, digits with optional `,ddd` groups, a decimal part, a `%`, an
/// ordinal suffix, a decade `s`, or a `h:mm` time); returns them and the index after.
fn spell_number(chars: &[char], start: usize) -> (String, usize) {
    let mut i = start;
    let currency = match chars[i] {
        '$' => Some(("dollar", "dollars")),
        '£' => Some(("pound", "pounds")),
        '€' => Some(("euro", "euros")),
        _ => None,
    };
    let negative = chars[i] == '-';
    if currency.is_some() || negative {
        i += 1;
    }
    let digit = |j: usize| chars.get(j).is_some_and(|c| c.is_ascii_digit());
    let int_start = i;
    while digit(i) {
        i += 1;
    }
    let mut int_digits: String = chars[int_start..i].iter().collect();
    let mut grouped = false;
    // Thousands groups: "1,234,567" (a comma followed by exactly three digits).
    if int_digits.len() <= 3 {
        while chars.get(i) == Some(&',')
            && digit(i + 1)
            && digit(i + 2)
            && digit(i + 3)
            && !digit(i + 4)
        {
            int_digits.extend(&chars[i + 1..i + 4]);
            i += 4;
            grouped = true;
        }
    }
    // A time: "10:30".
    if !grouped
        && currency.is_none()
        && int_digits.len() <= 2
        && chars.get(i) == Some(&':')
        && digit(i + 1)
        && digit(i + 2)
        && !digit(i + 3)
    {
        let hours = numbers::cardinal(int_digits.parse().unwrap_or(0));
        let minutes: u64 = chars[i + 1..i + 3]
            .iter()
            .collect::<String>()
            .parse()
            .unwrap_or(0);
        let said = match minutes {
            0 => format!("{hours} o'clock"),
            1..=9 => format!("{hours} oh {}", numbers::cardinal(minutes)),
            m => format!("{hours} {}", numbers::cardinal(m)),
        };
        return (said, i + 3);
    }
    let mut frac = String::new();
    if chars.get(i) == Some(&'.') && digit(i + 1) {
        i += 1;
        while digit(i) {
            frac.push(chars[i]);
            i += 1;
        }
    }
    let value: Option<u64> = int_digits.parse().ok();
    let leading_zero = int_digits.len() > 1 && int_digits.starts_with('0') && !grouped;
    let int_words = match value {
        Some(v) if !leading_zero => numbers::cardinal(v),
        _ => numbers::digits(&int_digits),
    };
    let suffix_is = |j: usize, s: &str| {
        let end = j + s.len();
        end <= chars.len()
            && chars[j..end]
                .iter()
                .map(|c| c.to_ascii_lowercase())
                .eq(s.chars())
            && !chars.get(end).is_some_and(|c| c.is_alphanumeric())
    };
    let mut words = if negative {
        "minus ".to_string()
    } else {
        String::new()
    };
    if let Some((one, many)) = currency {
        let cents: Option<u64> = (frac.len() == 2).then(|| frac.parse().ok()).flatten();
        match (value, cents) {
            (Some(0), Some(c)) if c > 0 => {
                words.push_str(&format!("{} cent{}", numbers::cardinal(c), plural_s(c)))
            }
            (Some(v), Some(c)) if c > 0 => words.push_str(&format!(
                "{int_words} {} {} cent{}",
                if v == 1 { one } else { many },
                numbers::cardinal(c),
                plural_s(c)
            )),
            (Some(1), _) if frac.is_empty() => words.push_str(&format!("{int_words} {one}")),
            _ if frac.is_empty() || frac.chars().all(|c| c == '0') => {
                words.push_str(&format!("{int_words} {many}"))
            }
            _ => words.push_str(&format!(
                "{int_words} point {} {many}",
                numbers::digits(&frac)
            )),
        }
        return (words, i);
    }
    if !frac.is_empty() {
        words.push_str(&format!("{int_words} point {}", numbers::digits(&frac)));
        if chars.get(i) == Some(&'%') {
            words.push_str(" percent");
            i += 1;
        }
        return (words, i);
    }
    if chars.get(i) == Some(&'%') {
        words.push_str(&format!("{int_words} percent"));
        return (words, i + 1);
    }
    if let Some(v) = value.filter(|_| !leading_zero && !negative) {
        for suffix in ["st", "nd", "rd", "th"] {
            if suffix_is(i, suffix) {
                words.push_str(&numbers::ordinal(v));
                return (words, i + 2);
            }
        }
        let is_year = !grouped && int_digits.len() == 4 && (1100..=2099).contains(&v);
        let decade = is_year || (int_digits.len() == 2 && v % 10 == 0);
        if decade && suffix_is(i, "s") {
            let said = if is_year {
                numbers::year(v)
            } else {
                numbers::cardinal(v)
            };
            words.push_str(&numbers::plural(&said));
            return (words, i + 1);
        }
        if is_year {
            words.push_str(&numbers::year(v));
            return (words, i);
        }
    }
    words.push_str(&int_words);
    (words, i)
}

fn plural_s(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Runs of spaces to one, no space before clause punctuation, trimmed.
fn collapse_spaces(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == ' ' && (out.is_empty() || out.ends_with(' ')) {
            continue;
        }
        if matches!(c, ',' | '.' | '!' | '?' | ';' | ':' | '…') && out.ends_with(' ') {
            out.pop();
        }
        out.push(c);
    }
    while out.ends_with(' ') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::normalize;

    #[test]
    fn whitespace_quotes_dashes() {
        assert_eq!(normalize("  Hello,\n\tworld!  "), "Hello, world!");
        assert_eq!(normalize("“Don’t,” she said."), "Don't, she said.");
        assert_eq!(
            normalize("Wait—what? Yes -- no - maybe"),
            "Wait — what? Yes — no — maybe"
        );
        assert_eq!(normalize("So... then"), "So… then");
        assert_eq!(
            normalize("The cat (a tabby) sat."),
            "The cat, a tabby, sat."
        );
        assert_eq!(normalize("pages 10–20"), "pages ten to twenty");
    }

    #[test]
    fn abbreviations() {
        assert_eq!(
            normalize("Mr. Smith met Dr. Who."),
            "Mister Smith met Doctor Who."
        );
        assert_eq!(
            normalize("apples, pears, etc. Then we left"),
            "apples, pears, et cetera. Then we left"
        );
        assert_eq!(
            normalize("fruit, e.g. apples, etc. and more"),
            "fruit, for example apples, et cetera and more"
        );
        assert_eq!(normalize("No. 5 and No. way"), "number five and No. way");
        assert_eq!(
            normalize("e.g. MTV at 9 a.m. Then"),
            "for example MTV at nine AM. Then"
        );
        // Not at a word start: left alone.
        assert_eq!(normalize("AMr. x"), "AMr. x");
    }

    #[test]
    fn numbers() {
        assert_eq!(normalize("I have 3 cats."), "I have three cats.");
        assert_eq!(
            normalize("It costs 1,234 yen"),
            "It costs one thousand two hundred thirty-four yen"
        );
        assert_eq!(normalize("pi is 3.14"), "pi is three point one four");
        assert_eq!(
            normalize("In 1984, and 2005."),
            "In nineteen eighty-four, and two thousand five."
        );
        assert_eq!(
            normalize("the 1980s and 90s"),
            "the nineteen eighties and nineties"
        );
        assert_eq!(normalize("the 21st floor"), "the twenty-first floor");
        assert_eq!(
            normalize("$5, $1 and $3.50"),
            "five dollars, one dollar and three dollars fifty cents"
        );
        assert_eq!(normalize("50% off"), "fifty percent off");
        assert_eq!(normalize("It is -5 now"), "It is minus five now");
        assert_eq!(
            normalize("at 10:30 or 7:05"),
            "at ten thirty or seven oh five"
        );
        assert_eq!(normalize("agent 007"), "agent zero zero seven");
        assert_eq!(normalize("mp3 files"), "mp three files");
        assert_eq!(normalize("1,2,3"), "one,two,three");
    }
}
