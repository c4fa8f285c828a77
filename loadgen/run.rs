//! `loadgen run`: the plan run, its report printed, and `--repeat`, which runs a result's
//! command line again.

use clap::Parser;

use loadgen::app::{self, Format, Model, RunOptions};
use loadgen::error::{Error, Exit};

use crate::args::{Cli, Cmd, FormatArg, RunArgs};
use crate::plan_of::{metrics_config, plan_of};
use crate::{doc_on_stdout, print_report, runtime};

pub fn cmd_run(a: RunArgs) -> Result<Exit, Error> {
    if let Some(path) = &a.repeat {
        return cmd_repeat(path, !a.targets.is_empty());
    }
    let plan = plan_of(&a)?;
    let format = match a.format {
        FormatArg::Text => Format::Text,
        FormatArg::Json => Format::Json,
    };
    let opts = RunOptions {
        say: loadgen::sink::stderr(),
        targets: a.targets.clone(),
        output: a.output.clone(),
        format,
        progress: !a.quiet,
        embedded_rows: a.keys,
        hooks: Vec::new(),
        instance: a.instance.clone(),
        metrics: metrics_config(&a)?,
        hdr_log: a.hdr_log.clone(),
        start_at: a.start_at,
        server_pid: a.server_pid,
        model: match (&a.sweep, &a.slo) {
            (Some(c), _) => Model::Sweep(c.0.clone()),
            (None, Some(s)) => Model::Slo(s.clone()),
            (None, None) => Model::Single,
        },
    };
    let rt = runtime()?;
    let out = rt.block_on(async {
        let stop = app::stop_on_signals(loadgen::sink::stderr());
        app::execute(&plan, opts, stop).await
    });
    let mut out = out.map_err(|e| e.0)?;
    print_report(&out.file, format, doc_on_stdout(a.output.as_deref()));
    if let Some(p) = &out.path {
        let beside: Vec<String> = [("report", &out.report), ("chart", &out.chart)]
            .iter()
            .filter_map(|(what, f)| f.as_ref().map(|f| format!("{what}: {}", f.display())))
            .collect();
        let beside = if beside.is_empty() {
            String::new()
        } else {
            format!(" ({})", beside.join(", "))
        };
        eprintln!("loadgen: result written to {}{beside}", p.display());
    }
    if let Some(e) = out.exporter.take() {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        if !a.quiet && !e.linger().is_zero() {
            let until = std::time::SystemTime::now() + e.linger();
            eprintln!(
                "loadgen: metrics stay up at http://{}/ for {} (until {}); Ctrl-C ends it sooner",
                e.local_addr(),
                humantime::format_duration(e.linger()),
                humantime::format_rfc3339_seconds(until)
            );
        }
        rt.block_on(e.finish());
    }
    if a.strict && out.file.runs.iter().any(|r| !r.verdict.valid) {
        return Ok(Exit::NotValid);
    }
    // Leave without waiting for the embedded server's threads.
    Ok(out.exit)
}

/// `run --repeat FILE`: the file's flags, then the user's own (which override them), parsed
/// again as one command line and run.
fn cmd_repeat(path: &std::path::Path, targets_given: bool) -> Result<Exit, Error> {
    let mut given = Vec::new();
    let mut argv = std::env::args().skip_while(|a| a != "run").skip(1);
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "--repeat" => {
                argv.next();
            }
            a if a.starts_with("--repeat=") => {}
            _ => given.push(arg),
        }
    }
    let args = loadgen::repeat::args_of(path, &given, targets_given)?;
    let line: Vec<String> = ["loadgen", "run"]
        .into_iter()
        .map(String::from)
        .chain(args)
        .chain(given)
        .collect();
    // Retyped beside --repeat, a target may carry its password: shown masked, as everywhere.
    let shown: Vec<String> = line
        .iter()
        .map(|a| shell_word(&loadgen::url::redact_text(a)))
        .collect();
    eprintln!("loadgen: repeating {}: {}", path.display(), shown.join(" "));
    let cli = Cli::try_parse_from(&line).map_err(|e| {
        let first = e.to_string().lines().next().unwrap_or_default().to_string();
        format!(
            "--repeat {}: {}",
            path.display(),
            first.trim_start_matches("error: ")
        )
    })?;
    match cli.cmd {
        Cmd::Run(b) if b.repeat.is_none() => cmd_run(b),
        _ => Err(format!("--repeat {}: a repeat cannot repeat again", path.display()).into()),
    }
}

/// `a` as a shell reads it back: quoted when it holds anything but plain characters.
fn shell_word(a: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.,:/=@%+".contains(c);
    match !a.is_empty() && a.chars().all(plain) {
        true => a.to_string(),
        false => format!("'{}'", a.replace('\'', "'\\''")),
    }
}
