//! `cargo xtask bench <target> [--json FILE] [--md FILE] [--quick] [--threads 1,2]`;
//! targets `kernels`, `mimi [--model F --config C]`, `kokoro`, `moshi`, `converse`,
//! `serve [--long-words N]`.
//!
//! Benchmarks measure speed against a reference measured in the same run on
//! the same machine, and report ratios; they never assert timings.

mod bandwidth;
mod converse;
mod kernels;
mod kokoro;
mod mimi;
mod moshi;
mod report;
mod rss;
mod serve;
mod timing;

/// Options shared by every bench target.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Write the rows as JSON here.
    pub json: Option<std::path::PathBuf>,
    /// Write the markdown table here.
    pub md: Option<std::path::PathBuf>,
    /// Shorter timing windows (for smoke runs).
    pub quick: bool,
    /// Thread budgets to measure.
    pub threads: Vec<usize>,
}

fn parse(args: &[String]) -> Result<(String, BenchOptions), String> {
    let mut target = None;
    let mut opts = BenchOptions {
        json: None,
        md: None,
        quick: false,
        threads: vec![1, 2],
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" => opts.json = Some(it.next().ok_or("--json needs a file")?.into()),
            "--md" => opts.md = Some(it.next().ok_or("--md needs a file")?.into()),
            "--quick" => opts.quick = true,
            "--threads" => {
                let list = it.next().ok_or("--threads needs a list like 1,2")?;
                opts.threads = list
                    .split(',')
                    .map(|t| {
                        t.trim()
                            .parse::<usize>()
                            .map_err(|e| format!("--threads {list}: {e}"))
                    })
                    .collect::<Result<_, _>>()?;
                if opts.threads.contains(&0) {
                    return Err("--threads: a budget of 0 threads computes nothing".into());
                }
            }
            t if !t.starts_with('-') && target.is_none() => target = Some(t.to_string()),
            other => return Err(format!("unknown bench argument `{other}`")),
        }
    }
    Ok((
        target.ok_or("bench needs a target: kernels, mimi, kokoro, moshi, converse, serve")?,
        opts,
    ))
}

/// Run `cargo xtask bench ...`.
pub fn run(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("mimi-child") => return mimi::child(&args[1..]),
        Some("kokoro-child") => return kokoro::child(&args[1..]),
        Some("moshi-child") => return moshi::child(&args[1..]),
        Some("converse-child") => return converse::child(&args[1..]),
        Some("serve-child") => return serve::child(&args[1..]),
        _ => {}
    }
    // Target-specific options (model files) pass through to the target.
    let (mut common, mut extra) = (Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--model" || a == "--config" || a == "--long-words" {
            extra.push(a.clone());
            extra.extend(it.next().cloned());
        } else {
            common.push(a.clone());
        }
    }
    let (target, opts) = parse(&common)?;
    if cfg!(debug_assertions) {
        eprintln!("warning: xtask built with debug assertions; numbers are not representative");
    }
    let rows = match target.as_str() {
        "kernels" => kernels::run(&opts)?,
        "mimi" => return mimi::run(&opts, &extra),
        "kokoro" => return kokoro::run(&opts),
        "moshi" => return moshi::run(&opts),
        "converse" => return converse::run(&opts),
        "serve" => return serve::run(&opts, &extra),
        other => {
            return Err(format!(
                "unknown bench target `{other}` (available: kernels, mimi, kokoro, moshi, converse, serve)"
            ))
        }
    };
    report::emit(&target, &rows, &opts)
}
