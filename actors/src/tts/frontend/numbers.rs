//! Numbers spelled out in American English words (cardinals, ordinals, years, digits).

const ONES: [&str; 20] = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
];
const TENS: [&str; 10] = [
    "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
];
const SCALES: [&str; 7] = [
    "",
    "thousand",
    "million",
    "billion",
    "trillion",
    "quadrillion",
    "quintillion",
];

/// Words for 0..=99 (`twenty-one`).
fn below_hundred(n: u64) -> String {
    match n {
        0..=19 => ONES[n as usize].to_string(),
        _ if n.is_multiple_of(10) => TENS[(n / 10) as usize].to_string(),
        _ => format!("{}-{}", TENS[(n / 10) as usize], ONES[(n % 10) as usize]),
    }
}

/// Words for 0..=999.
fn below_thousand(n: u64) -> String {
    match (n / 100, n % 100) {
        (0, r) => below_hundred(r),
        (h, 0) => format!("{} hundred", ONES[h as usize]),
        (h, r) => format!("{} hundred {}", ONES[h as usize], below_hundred(r)),
    }
}

/// A cardinal number in words: `1234` → `one thousand two hundred thirty-four`.
pub fn cardinal(n: u64) -> String {
    if n == 0 {
        return ONES[0].to_string();
    }
    let mut groups = Vec::new();
    let mut rest = n;
    while rest > 0 {
        groups.push(rest % 1000);
        rest /= 1000;
    }
    let mut words: Vec<String> = Vec::new();
    for (scale, &g) in groups.iter().enumerate().rev() {
        if g == 0 {
            continue;
        }
        words.push(below_thousand(g));
        if scale > 0 {
            words.push(SCALES[scale].to_string());
        }
    }
    words.join(" ")
}

/// An ordinal in words: `21` → `twenty-first`.
pub fn ordinal(n: u64) -> String {
    let words = cardinal(n);
    // Only the last word changes: "twenty-one" → "twenty-first".
    let split = words.rfind([' ', '-']).map_or(0, |i| i + 1);
    let (head, last) = words.split_at(split);
    let last = match last {
        "one" => "first".to_string(),
        "two" => "second".to_string(),
        "three" => "third".to_string(),
        "five" => "fifth".to_string(),
        "eight" => "eighth".to_string(),
        "nine" => "ninth".to_string(),
        "twelve" => "twelfth".to_string(),
        w if w.ends_with('y') => format!("{}ieth", &w[..w.len() - 1]),
        w => format!("{w}th"),
    };
    format!("{head}{last}")
}

/// A year the way it is said: `1984` → `nineteen eighty-four`, `2005` → `two thousand five`,
/// `1900` → `nineteen hundred`, `2010` → `twenty ten`.
pub fn year(n: u64) -> String {
    let (hi, lo) = (n / 100, n % 100);
    if !(10..100).contains(&hi) || (n % 1000 < 10 && hi % 10 == 0) {
        // 2000..=2009, 1000..=1009: said as a cardinal.
        return cardinal(n);
    }
    match lo {
        0 => format!("{} hundred", below_hundred(hi)),
        1..=9 => format!("{} oh {}", below_hundred(hi), ONES[lo as usize]),
        _ => format!("{} {}", below_hundred(hi), below_hundred(lo)),
    }
}

/// Each digit as a word: `007` → `zero zero seven`.
pub fn digits(text: &str) -> String {
    text.chars()
        .filter_map(|c| c.to_digit(10))
        .map(|d| ONES[d as usize])
        .collect::<Vec<_>>()
        .join(" ")
}

/// The plural of a spelled number's last word: `nineteen eighties`, `sixes`.
pub fn plural(words: &str) -> String {
    if let Some(stem) = words.strip_suffix('y') {
        format!("{stem}ies")
    } else if words.ends_with('x') {
        format!("{words}es")
    } else {
        format!("{words}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cardinals() {
        assert_eq!(cardinal(0), "zero");
        assert_eq!(cardinal(7), "seven");
        assert_eq!(cardinal(42), "forty-two");
        assert_eq!(cardinal(100), "one hundred");
        assert_eq!(cardinal(1_234), "one thousand two hundred thirty-four");
        assert_eq!(cardinal(2_000_001), "two million one");
        assert_eq!(
            cardinal(u64::MAX),
            "eighteen quintillion four hundred forty-six quadrillion seven hundred forty-four trillion seventy-three billion seven hundred nine million five hundred fifty-one thousand six hundred fifteen"
        );
    }

    #[test]
    fn ordinals_years_digits() {
        assert_eq!(ordinal(1), "first");
        assert_eq!(ordinal(12), "twelfth");
        assert_eq!(ordinal(21), "twenty-first");
        assert_eq!(ordinal(40), "fortieth");
        assert_eq!(ordinal(103), "one hundred third");
        assert_eq!(year(1984), "nineteen eighty-four");
        assert_eq!(year(1900), "nineteen hundred");
        assert_eq!(year(1905), "nineteen oh five");
        assert_eq!(year(2005), "two thousand five");
        assert_eq!(year(2000), "two thousand");
        assert_eq!(year(2010), "twenty ten");
        assert_eq!(year(2026), "twenty twenty-six");
        assert_eq!(digits("007"), "zero zero seven");
        assert_eq!(plural(&year(1980)), "nineteen eighties");
    }
}
