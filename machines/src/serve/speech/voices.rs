//! Voice names as clients send them: a voxlane voice or blend
//! (`jf_alpha:0.7,jm_kumo:0.3`), Kokoro-FastAPI's blends (`a+b`, `a(2)+b`),
//! and OpenAI's voice names, mapped to voices of the loaded pack.

/// OpenAI's voices and the Kokoro voice each stands for (the first of the
/// list that the loaded pack has; none when it has none of them).
pub const OPENAI_VOICES: [(&str, &[&str]); 13] = [
    ("alloy", &["jf_alpha", "af_alloy", "af_heart"]),
    ("ash", &["jm_kumo", "am_echo", "am_adam"]),
    ("ballad", &["jm_kumo", "bm_fable", "am_adam"]),
    ("cedar", &["jm_kumo", "am_onyx", "am_adam"]),
    ("coral", &["jf_gongitsune", "af_nova", "af_heart"]),
    ("echo", &["jm_kumo", "am_echo", "am_adam"]),
    ("fable", &["jm_kumo", "bm_fable", "am_adam"]),
    ("marin", &["jf_tebukuro", "af_nova", "af_heart"]),
    ("nova", &["jf_nezumi", "af_nova", "af_heart"]),
    ("onyx", &["jm_kumo", "am_onyx", "am_adam"]),
    ("sage", &["jf_alpha", "af_sky", "af_heart"]),
    ("shimmer", &["jf_tebukuro", "af_nova", "af_heart"]),
    ("verse", &["jm_kumo", "am_echo", "am_adam"]),
];

/// The OpenAI names that map to a voice in `pack`, with that voice.
pub fn openai_aliases(pack: &[String]) -> Vec<(&'static str, String)> {
    OPENAI_VOICES
        .iter()
        .filter_map(|(name, targets)| {
            let t = targets.iter().find(|t| pack.iter().any(|v| v == *t))?;
            Some((*name, (*t).to_string()))
        })
        .collect()
}

/// A client's voice string as a voxlane voice spec: OpenAI names replaced
/// by their voice, Kokoro-FastAPI's `a+b` / `a(2)+b` as `a:1,b:1` /
/// `a:2,b:1`; anything else passes through (the voice pack checks it).
pub fn to_voice_spec(voice: &str, aliases: &[(&'static str, String)]) -> Result<String, String> {
    let voice = voice.trim();
    if voice.contains(',') || voice.contains(':') || !voice.contains(['+', '(']) {
        return Ok(resolve(voice, aliases));
    }
    let mut parts = Vec::new();
    for item in voice.split('+') {
        let item = item.trim();
        let (name, weight) = match item.split_once('(') {
            Some((name, rest)) => {
                let w = rest
                    .strip_suffix(')')
                    .ok_or_else(|| format!("voice `{voice}`: `{item}` lacks its closing `)`"))?;
                let w: f32 = w
                    .trim()
                    .parse()
                    .map_err(|_| format!("voice `{voice}`: weight `{w}` is not a number"))?;
                (name.trim(), w)
            }
            None => (item, 1.0),
        };
        if name.is_empty() {
            return Err(format!("voice `{voice}`: an empty voice name"));
        }
        parts.push(format!("{}:{weight}", resolve(name, aliases)));
    }
    Ok(parts.join(","))
}

fn resolve(name: &str, aliases: &[(&'static str, String)]) -> String {
    aliases
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(name))
        .map_or_else(|| name.to_string(), |(_, v)| v.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pack() -> Vec<String> {
        ["jf_alpha", "jf_nezumi", "jm_kumo"]
            .map(String::from)
            .to_vec()
    }

    #[test]
    fn openai_names_map_into_the_pack() {
        let a = openai_aliases(&pack());
        assert_eq!(to_voice_spec("alloy", &a).unwrap(), "jf_alpha");
        assert_eq!(to_voice_spec("Onyx", &a).unwrap(), "jm_kumo");
        assert_eq!(to_voice_spec("nova", &a).unwrap(), "jf_nezumi");
        // `coral` has no voice of its list in this pack: not an alias here.
        assert!(a.iter().all(|(n, _)| *n != "coral"));
        assert_eq!(to_voice_spec("coral", &a).unwrap(), "coral");
    }

    #[test]
    fn kokoro_fastapi_blends_become_voxlane_blends() {
        let a = openai_aliases(&pack());
        assert_eq!(
            to_voice_spec("jf_alpha+jm_kumo", &a).unwrap(),
            "jf_alpha:1,jm_kumo:1"
        );
        assert_eq!(
            to_voice_spec("jf_alpha(2)+jm_kumo", &a).unwrap(),
            "jf_alpha:2,jm_kumo:1"
        );
        assert_eq!(
            to_voice_spec("alloy(0.5)+onyx", &a).unwrap(),
            "jf_alpha:0.5,jm_kumo:1"
        );
        assert_eq!(
            to_voice_spec("jf_alpha:0.7,jm_kumo:0.3", &a).unwrap(),
            "jf_alpha:0.7,jm_kumo:0.3"
        );
        assert!(to_voice_spec("jf_alpha(2+jm_kumo", &a).is_err());
        assert!(to_voice_spec("jf_alpha(x)+jm_kumo", &a).is_err());
        assert!(to_voice_spec("+jm_kumo", &a).is_err());
    }
}
