//! `/debug/machines` and the `/debug` page on the real engine (the tiny
//! PersonaPlex): the live machines' states and counters before, during and
//! after a conversation, and the page drawn by headless Chromium with each
//! machine's current state highlighted in its diagram.

use super::duplex_e2e::{engine, fixture_dir, user_pcm};
use super::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

/// `/debug/machines`, parsed: machine name → its JSON.
async fn machines(addr: std::net::SocketAddr) -> BTreeMap<String, Value> {
    let (status, body) = http_get(addr, "/debug/machines").await;
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["machines"]
        .as_array()
        .expect("a list of machines")
        .iter()
        .map(|m| (m["machine"].as_str().unwrap().to_string(), m.clone()))
        .collect()
}

fn state(m: &BTreeMap<String, Value>, name: &str) -> String {
    m[name]["state"].as_str().unwrap().to_string()
}

fn events(m: &BTreeMap<String, Value>, name: &str, event: &str) -> u64 {
    m[name]["events"][event].as_u64().unwrap_or(0)
}

const WAVEFRONT: &str = "speech_wavefront";
const LM: &str = "moshi_executor";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_machines_follow_a_conversation() {
    let server = start(engine(), Some(fixture_dir())).await;
    let idle = machines(server.addr).await;
    assert_eq!(
        idle.keys().map(String::as_str).collect::<Vec<_>>(),
        ["mimi_decode_session", "mimi_encode_session", LM, WAVEFRONT],
        "the wavefront and the three stages it drives"
    );
    for (name, m) in &idle {
        let diagram = m["diagram"].as_str().unwrap();
        assert!(diagram.contains("stateDiagram-v2"), "{name}");
        assert!(
            diagram.contains(&format!("{}:", m["state"].as_str().unwrap())),
            "{name}'s current state is in its diagram"
        );
        assert_eq!(m["family"], "speech");
        assert!(m["time_in_state_ms"].is_object() && m["rejections"].is_object());
    }
    assert_eq!(state(&idle, WAVEFRONT), "unbound");
    assert_eq!(events(&idle, WAVEFRONT, "push_frame"), 0);

    // Mid-conversation: the wavefront is bound and has stepped every frame sent.
    let mut ws = connect(server.addr, "text_temperature=0&audio_temperature=0").await;
    let mut t = Transcript::default();
    read_until(&mut ws, &mut t, Duration::from_secs(120), |t| {
        !t.kinds.is_empty()
    })
    .await;
    assert_eq!(t.kinds, [0], "{:?}", t.errors);
    let (pcm, frames) = user_pcm(2);
    send_all(&mut ws, &audio_messages(&pcm)).await;
    read_until(&mut ws, &mut t, Duration::from_secs(120), |t| {
        t.audio_messages > frames
    })
    .await;
    let live = machines(server.addr).await;
    assert_eq!(state(&live, WAVEFRONT), "steady");
    assert_eq!(
        events(&live, WAVEFRONT, "push_frame") as usize,
        frames + 2,
        "one push per input frame"
    );
    assert_eq!(state(&live, LM), "ready");
    assert!(
        events(&live, LM, "step") as usize >= frames,
        "{:?}",
        live[LM]["events"]
    );
    assert!(
        events(&live, "mimi_encode_session", "push_pcm") as usize >= frames,
        "{:?}",
        live["mimi_encode_session"]["events"]
    );
    let spent: f64 = live[WAVEFRONT]["time_in_state_ms"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_f64().unwrap())
        .sum();
    assert!(spent > 0.0);
    drop(ws);
    assert!(
        eventually(Duration::from_secs(30), || server.state.streams.in_flight()
            == 0)
        .await
    );
    // The counters persist after the conversation: the machines are long-lived.
    let after = machines(server.addr).await;
    assert!(events(&after, WAVEFRONT, "push_frame") >= events(&live, WAVEFRONT, "push_frame"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_page_and_its_script_are_served() {
    let server = start(engine(), None).await;
    let (status, page) = http_get(server.addr, "/debug").await;
    assert_eq!(status, 200);
    assert!(page.contains("/debug/mermaid.min.js") && page.contains("/debug/machines"));
    assert!(
        !page.contains("https://"),
        "no CDN: everything from the binary"
    );
    // The script comes gzipped with its encoding declared.
    let mut s = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(
        &mut s,
        b"GET /debug/mermaid.min.js HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let mut buf = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(&mut s, &mut buf)
        .await
        .unwrap();
    let split = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&buf[..split]).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert_eq!(&buf[split + 4..split + 6], [0x1f, 0x8b], "a gzip stream");
    assert!(buf.len() - split > 500_000, "the whole of mermaid");
    server.shutdown().await;
}

/// Chromium on this machine, if any.
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| {
            std::process::Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_page_highlights_live_states_in_headless_chromium() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("VOXLANE_REQUIRE_BROWSER").is_none(),
            "VOXLANE_REQUIRE_BROWSER is set but no chromium is installed"
        );
        eprintln!("skipped: no chromium (apt install chromium)");
        return;
    };
    let server = start(engine(), Some(fixture_dir())).await;
    // One conversation first, so the states are past their initial ones.
    let mut ws = connect(server.addr, "text_temperature=0&audio_temperature=0").await;
    let mut t = Transcript::default();
    read_until(&mut ws, &mut t, Duration::from_secs(120), |t| {
        !t.kinds.is_empty()
    })
    .await;
    let (pcm, frames) = user_pcm(2);
    send_all(&mut ws, &audio_messages(&pcm)).await;
    read_until(&mut ws, &mut t, Duration::from_secs(120), |t| {
        t.audio_messages > frames
    })
    .await;
    drop(ws);
    assert!(
        eventually(Duration::from_secs(30), || server.state.streams.in_flight()
            == 0)
        .await
    );
    let want = machines(server.addr).await;

    let profile = std::env::temp_dir().join(format!("voxlane-chromium-{}", std::process::id()));
    let out = tokio::process::Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--virtual-time-budget=20000",
            "--run-all-compositor-stages-before-draw",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("http://{}/debug", server.addr))
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), out)
        .await
        .expect("chromium finishes")
        .expect("chromium runs");
    let _ = std::fs::remove_dir_all(&profile);
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains(&format!("data-rendered=\"{}\"", want.len())),
        "the page drew every machine; stderr: {}\nDOM head: {}",
        String::from_utf8_lossy(&out.stderr),
        &dom[..dom.len().min(3000)]
    );
    for (name, m) in &want {
        let st = m["state"].as_str().unwrap();
        let tag = format!("data-machine=\"{name}\"");
        let at = dom
            .find(&tag)
            .unwrap_or_else(|| panic!("{name} has a section"));
        let end = dom[at..].find("</section>").map_or(dom.len(), |e| at + e);
        let section = &dom[at..end];
        assert!(
            section.contains(&format!("data-state=\"{st}\"")),
            "{name}: drawn in state {st}"
        );
        assert!(section.contains("<svg"), "{name}: a rendered diagram");
        // mermaid puts the `current` class on the highlighted state's node.
        let node = section
            .match_indices("current")
            .map(|(i, _)| &section[section[..i].rfind('<').unwrap_or(0)..])
            .find(|s| s.starts_with("<g"))
            .unwrap_or_else(|| panic!("{name}: no highlighted node"));
        let node = &node[..node.find('>').unwrap_or(node.len())];
        assert!(
            node.contains(&format!("state-{st}-")),
            "{name}: the highlighted node is {st}: {node}"
        );
    }
    server.shutdown().await;
}
