//! The loadgen command line: flags -> Plan -> library -> print -> exit code.
//! Exit codes: 0 success, 1 the run finished but saw errors (or stopped early), 2 bad input or
//! setup failure (one line on stderr, never a panic or a stack trace), 3 with `--strict` when a
//! run's verdict is not valid, 4 with `compare --fail-if` when a difference trips it.

mod args;
mod plan_of;
mod run;

use clap::Parser;

use loadgen::app::Format;
use loadgen::error::{Error, Exit};

use args::{
    Cli, Cmd, CompareArgs, FormatArg, MergeArgs, PrepareArgs, ReportArgs, ServeArgs, TraceBenchArgs,
};
use run::cmd_run;

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Run(a) => cmd_run(a),
        Cmd::Prepare(a) => cmd_prepare(a),
        Cmd::Serve(a) => cmd_serve(a),
        Cmd::Merge(a) => cmd_merge(a),
        Cmd::Report(a) => cmd_report(a),
        Cmd::TraceBench(a) => cmd_trace_bench(a),
        Cmd::Compare(a) => cmd_compare(a),
    };
    // Every exit code is decided here, from `Exit` (loadgen::error).
    std::process::exit(match code {
        Ok(exit) => exit.code(),
        Err(e) => {
            // The last sink of every error: a server's message may echo a URL or a secret.
            eprintln!("loadgen: {}", loadgen::url::redact_text(&e.to_string()));
            e.exit().code()
        }
    });
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

fn cmd_prepare(a: PrepareArgs) -> Result<Exit, Error> {
    if a.rows == 0 {
        return Err("--rows must be at least 1".into());
    }
    let target = match &loadgen::proto::shards::ranges::group(&a.targets)[..] {
        [one] => one.clone(),
        _ => return Err("prepare takes one target at a time (several URLs are one target only as shards, each with ?keys=FROM-TO)".into()),
    };
    let rt = runtime()?;
    // Ctrl-C / SIGTERM ends a prepare at any step, a hung one included.
    let p = rt.block_on(async {
        let mut signals = loadgen::signals::StopSignals::install();
        tokio::select! {
            r = loadgen::prepare::prepare(&target, (1, a.rows), a.key_format.as_ref()) => r.map_err(|e| e.0),
            _ = signals.next() => Err(
                "stopped while preparing: the data set may be partly loaded; prepare again".into()
            ),
        }
    })?;
    println!(
        "loaded {} rows in {:.1}s ({} rows/s)",
        loadgen::report::text::thousands(p.rows),
        p.seconds,
        loadgen::report::text::thousands((p.rows as f64 / p.seconds.max(1e-9)) as u64)
    );
    match p.pruned {
        true => println!(
            "ids 1..{} hold the data set's rows and nothing outside them is left (rows a write run \
             inserted are gone): a write run starts from here; to reset after one, prepare again",
            a.rows
        ),
        false => println!(
            "ids 1..{} hold the data set's rows; keys of other ids were left as they are (a Redis \
             Cluster is not pruned)",
            a.rows
        ),
    }
    Ok(Exit::Clean)
}

// A bad or unreadable trace is bad input: one line naming the file and line.
fn cmd_trace_bench(a: TraceBenchArgs) -> Result<Exit, Error> {
    let r = loadgen::trace::bench::bench(&a.file).map_err(|e| e.to_string())?;
    println!("{}", r.render());
    Ok(Exit::Clean)
}

fn cmd_serve(a: ServeArgs) -> Result<Exit, Error> {
    use loadgen::serve::Bind;
    let bind =
        match &a.unix {
            Some(path) => Bind::Unix(path.clone()),
            None => Bind::Tcp(a.addr.parse().map_err(|_| {
                format!("bad --addr '{}': use IP:PORT like 127.0.0.1:8080", a.addr)
            })?),
        };
    if a.rows == 0 {
        return Err("--rows must be at least 1".into());
    }
    let threads = a.threads.unwrap_or_else(loadgen::plan::default_threads);
    let timing = loadgen::serve::Timing {
        delay: a.delay.unwrap_or_default(),
        cold: a.cold.unwrap_or_default(),
        noise: a.noise.as_deref().map(noise_of).transpose()?,
        drift: a.drift.as_deref().map(drift_of).transpose()?.unwrap_or(0.0),
    };
    if (timing.noise.is_some() || timing.drift != 0.0) && timing.delay.is_zero() {
        return Err(
            "--noise and --drift scale --delay: give a --delay too, like --delay 1ms".into(),
        );
    }
    let server = loadgen::serve::start_delayed(&bind, (1, a.rows), threads, timing).map_err(
        |e| match &bind {
            Bind::Tcp(addr) => format!("cannot listen on {addr}: {e}"),
            Bind::Unix(path) => format!("cannot listen on socket {}: {e}", path.display()),
        },
    )?;
    eprintln!(
        "loadgen: serving {} rows on {} (Ctrl-C stops)",
        loadgen::report::text::thousands(server.rows),
        server.url()
    );
    let rt = runtime()?;
    rt.block_on(async {
        let _ = tokio::signal::ctrl_c().await;
    });
    if let Bind::Unix(path) = &bind {
        let _ = std::fs::remove_file(path);
    }
    Ok(Exit::Clean)
}

fn cmd_merge(a: MergeArgs) -> Result<Exit, Error> {
    let merged = loadgen::merge::merge_files(&a.files, &loadgen::sink::stderr())?;
    let format = match a.format {
        FormatArg::Text => Format::Text,
        FormatArg::Json => Format::Json,
    };
    let on_stdout = doc_on_stdout(a.output.as_deref());
    print_report(&merged, format, on_stdout);
    if let Some(p) = a.output.filter(|_| !on_stdout) {
        let json = serde_json::to_vec_pretty(&merged).expect("result serializes");
        let dest = loadgen::output::Dest::of(&p)
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        dest.write(&json)
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        // The HTML report beside a file of our own, as a run writes one (not beside a device).
        let mut beside = String::new();
        if dest.is_file() {
            let html_path = loadgen::output::beside(&p, "html");
            let html = loadgen::report::html::render(&merged);
            match loadgen::output::write(&html_path, html.as_bytes()) {
                Ok(()) => beside = format!(" (report: {})", html_path.display()),
                Err(e) => eprintln!("loadgen: cannot write {}: {e}", html_path.display()),
            }
        }
        eprintln!("loadgen: merged result written to {}{beside}", p.display());
    }
    Ok(Exit::Clean)
}

fn cmd_compare(a: CompareArgs) -> Result<Exit, Error> {
    let read = |p: &std::path::PathBuf| loadgen::merge::read_input(p);
    let a_in = read(&a.files[0])?;
    let b_in = a.files.get(1).map(read).transpose()?;
    let c = loadgen::compare::compare(&a_in, b_in.as_ref(), a.force)?;
    let tripped = a
        .fail_if
        .as_ref()
        .map(|f| f.tripped(&c))
        .unwrap_or_default();
    match a.format {
        FormatArg::Json => emit(&(serde_json::to_string_pretty(&c).expect("serializes") + "\n")),
        FormatArg::Text => emit(&loadgen::compare::render(&c)),
    }
    for t in &tripped {
        eprintln!("loadgen: regression: {}", t.what);
    }
    Ok(if tripped.is_empty() {
        Exit::Clean
    } else {
        Exit::Regression
    })
}

fn cmd_report(a: ReportArgs) -> Result<Exit, Error> {
    // Parsed by the model (older files it still accepts included) and redacted.
    let input = loadgen::merge::read_input(&a.file)?;
    let html = loadgen::report::html::render(&input.file);
    let out = a
        .output
        .unwrap_or_else(|| loadgen::output::beside(&a.file, "html"));
    let cannot = |e: std::io::Error| format!("cannot write {}: {e}", out.display());
    let dest = loadgen::output::Dest::of(&out).map_err(cannot)?;
    dest.write(html.as_bytes()).map_err(cannot)?;
    if !dest.is_stdout() {
        eprintln!("loadgen: report written to {}", out.display());
    }
    Ok(Exit::Clean)
}

/// `-o -` or `-o /dev/stdout`: the JSON document takes stdout (one parseable document).
fn doc_on_stdout(output: Option<&std::path::Path>) -> bool {
    output
        .and_then(|p| loadgen::output::Dest::of(p).ok())
        .is_some_and(|d| d.is_stdout())
}

/// The report on stdout; when the JSON document goes there, the text report moves to stderr.
fn print_report(file: &loadgen::result::ResultFile, format: Format, doc_on_stdout: bool) {
    let json = || serde_json::to_string_pretty(file).expect("result serializes") + "\n";
    match format {
        Format::Json => emit(&json()),
        Format::Text if doc_on_stdout => {
            eprint!("{}", loadgen::report::text::render(file));
            emit(&json());
        }
        Format::Text => emit(&loadgen::report::text::render(file)),
    }
}

/// Writes the report to stdout; a closed pipe (`loadgen run | head`) is not an error.
fn emit(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

/// `serve --noise 50%,500ms`: the amplitude (under 100%) and the epoch.
fn noise_of(s: &str) -> Result<(f64, std::time::Duration), String> {
    let bad = || format!("bad --noise '{s}': use AMP,EPOCH like 50%,500ms (AMP under 100%)");
    let (amp, epoch) = s.split_once(',').ok_or_else(bad)?;
    let amp = amp
        .trim()
        .strip_suffix('%')
        .and_then(|a| a.parse::<f64>().ok())
        .filter(|a| (0.0..100.0).contains(a))
        .ok_or_else(bad)?;
    let epoch = loadgen::plan::parse_duration(epoch.trim()).map_err(|_| bad())?;
    if epoch.is_zero() {
        return Err(bad());
    }
    Ok((amp / 100.0, epoch))
}

/// `serve --drift 5%`: a share per second, above 0.
fn drift_of(s: &str) -> Result<f64, String> {
    s.trim()
        .strip_suffix('%')
        .and_then(|p| p.parse::<f64>().ok())
        .filter(|p| p.is_finite() && *p > 0.0)
        .map(|p| p / 100.0)
        .ok_or_else(|| format!("bad --drift '{s}': use a percentage per second above 0, like 5%"))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// `--help`'s first line names every protocol of the table.
    #[test]
    fn about_names_every_protocol() {
        let about = super::Cli::command()
            .get_about()
            .map(|a| a.to_string())
            .unwrap_or_default();
        for p in loadgen::proto::table::PROTOCOLS {
            assert!(about.contains(p.name), "{} missing from: {about}", p.name);
        }
    }
}
