//! libespeak-ng in process: the same phonemes as the `espeak-ng` program
//! (`espeak_TextToPhonemes`, IPA), without starting a process per text
//! (~10–20 ms each, most of a sentence's phonemization time).
//!
//! The shared library is opened at run time (`dlopen`), so the build needs
//! no C headers or link flags and a machine without it falls back to the
//! program. libespeak-ng keeps global state and is not thread-safe: every
//! call holds one process-wide lock.

use super::error::FrontendError;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::{Mutex, OnceLock};

/// The sonames tried, newest first (Debian's `libespeak-ng1` ships `.so.1`).
const SONAMES: &[&CStr] = &[c"libespeak-ng.so.1", c"libespeak-ng.so"];

/// `AUDIO_OUTPUT_SYNCHRONOUS`: no audio device is opened.
const AUDIO_OUTPUT_SYNCHRONOUS: c_int = 2;
/// `espeakINITIALIZE_DONT_EXIT`: report errors instead of exiting the process.
const INITIALIZE_DONT_EXIT: c_int = 0x8000;
/// `espeakCHARS_UTF8`.
const CHARS_UTF8: c_int = 1;
/// `phonememode` bit 1: IPA as UTF-8, no separator between phonemes.
const PHONEMES_IPA: c_int = 0x02;
/// `RTLD_NOW | RTLD_LOCAL`.
const RTLD_NOW: c_int = 2;

extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
}

type Initialize = unsafe extern "C" fn(c_int, c_int, *const c_char, c_int) -> c_int;
type SetVoiceByName = unsafe extern "C" fn(*const c_char) -> c_int;
type TextToPhonemes = unsafe extern "C" fn(*mut *const c_void, c_int, c_int) -> *const c_char;

/// The library's entry points and the voice it is set to.
struct Engine {
    set_voice: SetVoiceByName,
    text_to_phonemes: TextToPhonemes,
    voice: Option<String>,
}

// SAFETY: the entry points are plain C functions; all use goes through the
// process-wide `Mutex`, which serializes every call into the library.
unsafe impl Send for Engine {}

fn symbol(handle: *mut c_void, name: &CStr) -> Option<*mut c_void> {
    // SAFETY: `handle` came from a successful dlopen; `name` is NUL-terminated.
    let p = unsafe { dlsym(handle, name.as_ptr()) };
    (!p.is_null()).then_some(p)
}

fn open() -> Option<Engine> {
    let handle = SONAMES.iter().find_map(|name| {
        // SAFETY: a NUL-terminated soname; the handle is never closed.
        let h = unsafe { dlopen(name.as_ptr(), RTLD_NOW) };
        (!h.is_null()).then_some(h)
    })?;
    let init = symbol(handle, c"espeak_Initialize")?;
    let set_voice = symbol(handle, c"espeak_SetVoiceByName")?;
    let text_to_phonemes = symbol(handle, c"espeak_TextToPhonemes")?;
    // SAFETY: the symbols have these C signatures in every libespeak-ng
    // (speak_lib.h); a data pointer from dlsym is a function's address.
    let (init, set_voice, text_to_phonemes) = unsafe {
        (
            std::mem::transmute::<*mut c_void, Initialize>(init),
            std::mem::transmute::<*mut c_void, SetVoiceByName>(set_voice),
            std::mem::transmute::<*mut c_void, TextToPhonemes>(text_to_phonemes),
        )
    };
    // SAFETY: default data path (NULL); returns the sample rate or -1.
    let rate = unsafe {
        init(
            AUDIO_OUTPUT_SYNCHRONOUS,
            0,
            std::ptr::null(),
            INITIALIZE_DONT_EXIT,
        )
    };
    (rate > 0).then_some(Engine {
        set_voice,
        text_to_phonemes,
        voice: None,
    })
}

fn engine() -> Option<&'static Mutex<Engine>> {
    static ENGINE: OnceLock<Option<Mutex<Engine>>> = OnceLock::new();
    ENGINE.get_or_init(|| open().map(Mutex::new)).as_ref()
}

/// Whether libespeak-ng loads and initializes on this machine.
pub fn available() -> bool {
    engine().is_some()
}

/// The IPA phonemes of `text` in `voice`, clause by clause as the library
/// splits it, one string per clause.
pub fn phonemize(text: &str, voice: &str) -> Result<Vec<String>, FrontendError> {
    let failed = |detail: String| FrontendError::EspeakFailed {
        status: "libespeak-ng".into(),
        stderr: detail,
    };
    let engine = engine().ok_or_else(|| failed("the library is not available".into()))?;
    let mut e = engine.lock().unwrap_or_else(|p| p.into_inner());
    if e.voice.as_deref() != Some(voice) {
        let name = CString::new(voice).map_err(|_| failed(format!("voice {voice:?}")))?;
        // SAFETY: a NUL-terminated name; calls are serialized by the lock.
        let rc = unsafe { (e.set_voice)(name.as_ptr()) };
        if rc != 0 {
            e.voice = None;
            return Err(failed(format!("no voice {voice:?} (error {rc})")));
        }
        e.voice = Some(voice.to_string());
    }
    let text = CString::new(text.replace('\0', " ")).map_err(|e| failed(e.to_string()))?;
    let mut cursor: *const c_void = text.as_ptr().cast();
    let mut clauses = Vec::new();
    // The library advances `cursor` clause by clause and sets it to NULL at
    // the end of the text; the bound guards against a library that would not.
    for _ in 0..=text.as_bytes().len() {
        if cursor.is_null() {
            break;
        }
        // SAFETY: `cursor` points into `text` (NUL-terminated, alive for the
        // loop); the returned string is the library's buffer, copied at once.
        let out = unsafe { (e.text_to_phonemes)(&mut cursor, CHARS_UTF8, PHONEMES_IPA) };
        if out.is_null() {
            break;
        }
        // SAFETY: a NUL-terminated string owned by the library until the next call.
        clauses.push(
            unsafe { CStr::from_ptr(out) }
                .to_string_lossy()
                .into_owned(),
        );
    }
    Ok(clauses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_phonemes_are_ipa_words() {
        if !available() {
            eprintln!("libespeak-ng is not installed: nothing to check");
            return;
        }
        let p = phonemize("Hello world", "en-us").unwrap().join(" ");
        assert_eq!(p.trim(), "həlˈoʊ wˈɜːld");
        assert!(phonemize("Hello", "xx-nonexistent").is_err());
        // The voice comes back after a failed switch.
        assert_eq!(
            phonemize("world", "en-us").unwrap().join(" ").trim(),
            "wˈɜːld"
        );
    }
}
