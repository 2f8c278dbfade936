//! `/api/chat` query strings into a `ConverseRequest`, every bad value a typed error.

use std::path::Path;
use voxlane_machines::serve::duplex::{parse_query, ConverseRequest, QueryError};

fn voices() -> tempdir::Dir {
    tempdir::Dir::new()
}

/// A throwaway voices directory holding `NATF0.pt`.
mod tempdir {
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Self {
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let p = std::env::temp_dir().join(format!("voxlane-voices-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join("NATF0.pt"), b"x").unwrap();
            Self(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[test]
fn the_web_clients_query_parses() {
    let d = voices();
    let q = "worker_auth_id=x&text_temperature=0.7&text_topk=25&audio_temperature=0.8&audio_topk=250\
             &pad_mult=0&text_seed=12&audio_seed=-1&repetition_penalty_context=64&repetition_penalty=1\
             &text_prompt=You%20are%20a%20wise%20teacher.&voice_prompt=NATF0.pt&seed=42";
    let r = parse_query(Some(q), Some(&d.0)).unwrap();
    assert_eq!(
        r,
        ConverseRequest {
            text_prompt: Some("You are a wise teacher.".into()),
            voice_prompt: Some(d.0.join("NATF0.pt")),
            seed: Some(42),
            text_temperature: Some(0.7),
            text_topk: Some(25),
            audio_temperature: Some(0.8),
            audio_topk: Some(250),
            pad_mult: Some(0.0),
            repetition_penalty: Some(1.0),
            repetition_penalty_context: Some(64),
        }
    );
    assert_eq!(parse_query(None, None).unwrap(), ConverseRequest::default());
    let r = parse_query(Some("text_prompt=&voice_prompt=&seed=-1"), None).unwrap();
    assert_eq!(
        r,
        ConverseRequest::default(),
        "empty prompts and seed -1 are none"
    );
}

#[test]
fn bad_values_are_typed_errors() {
    let d = voices();
    let err = |q: &str| parse_query(Some(q), Some(&d.0)).unwrap_err();
    assert!(matches!(
        err("text_temperature=hot"),
        QueryError::NotANumber {
            param: "text_temperature",
            ..
        }
    ));
    assert!(matches!(
        err("audio_temperature=-1"),
        QueryError::OutOfRange {
            param: "audio_temperature",
            ..
        }
    ));
    assert!(matches!(
        err("audio_temperature=NaN"),
        QueryError::OutOfRange { .. }
    ));
    assert!(matches!(
        err("text_topk=0"),
        QueryError::OutOfRange {
            param: "text_topk",
            ..
        }
    ));
    assert!(matches!(
        err("audio_topk=2.5"),
        QueryError::NotANumber {
            param: "audio_topk",
            ..
        }
    ));
    assert!(matches!(
        err("seed=-2"),
        QueryError::OutOfRange { param: "seed", .. }
    ));
    assert!(matches!(
        err("seed=abc"),
        QueryError::NotANumber { param: "seed", .. }
    ));
    assert!(matches!(
        err("repetition_penalty=0"),
        QueryError::OutOfRange { .. }
    ));
    assert!(matches!(err("seed=1&seed=2"), QueryError::Repeated("seed")));
    assert!(matches!(
        err("voice_prompt=..%2Fetc%2Fpasswd"),
        QueryError::VoiceName(_)
    ));
    assert!(matches!(err("voice_prompt=.."), QueryError::VoiceName(_)));
    assert!(matches!(
        err("voice_prompt=NOPE.pt"),
        QueryError::VoiceNotFound { .. }
    ));
    let long = format!("text_prompt={}", "a".repeat(9000));
    assert!(matches!(err(&long), QueryError::TextTooLong(9000)));
    let e = parse_query(Some("voice_prompt=NATF0.pt"), None::<&Path>).unwrap_err();
    assert!(matches!(e, QueryError::NoVoicesDir(_)));
    assert_eq!(
        err("text_temperature=hot").to_string(),
        "text_temperature: `hot` is not a number",
        "the message names the parameter and the value"
    );
}
