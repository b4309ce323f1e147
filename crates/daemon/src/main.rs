//! # ribshard: the daemon and its command line
//!
//! Owns the `ribshard` binary: argument parsing, logging set-up and the subcommands. It
//! builds on the library crates and must never implement protocol logic itself.

use clap::{CommandFactory, Parser, Subcommand};
use ribshard::config;
use std::ffi::OsString;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "ribshard", version, about = "A multicore BGP daemon")]
struct Cli {
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, global = true)]
    log_json: bool,
    /// The running daemon's management API: its Unix socket, or ADDRESS:PORT of a TCP
    /// listener (`show`, `clear`, `configure`).
    #[arg(long, global = true, env = "RIBSHARD_SOCKET", default_value = config::DEFAULT_SOCKET)]
    socket: String,
    /// Print the API's JSON instead of tables (`show`, `clear`, `configure`).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon in the foreground.
    ///
    /// Until SIGTERM or SIGINT (a Cease to every neighbor first); SIGHUP reads the
    /// configuration again (thread counts change with sessions up).
    Run {
        /// The configuration file (TOML); see `ribshard config example`.
        #[arg(long, short, default_value = config::DEFAULT_FILE)]
        config: PathBuf,
        /// Write every received UPDATE to this MRT file (BGP4MP), as a collector would.
        #[arg(long)]
        dump_updates: Option<PathBuf>,
    },
    /// Ask the running daemon, in Junos words.
    ///
    /// `show bgp summary`, `show bgp neighbor [ADDRESS] [statistics]`, `show bgp group
    /// [NAME]`, `show bgp convergence`, `show route summary`, `show route [PREFIX|ADDRESS
    /// [exact|longer|orlonger]] [table T] [rib-sharding N] [receive-protocol bgp A]
    /// [advertising-protocol bgp A] [community C] [large-community C] [aspath-regex R]
    /// [next-hop A] [validation-state valid|invalid|unknown] [protocol bgp|local]
    /// [active-path] [detail|terse] [hidden] [rejected] [count]`, `show route
    /// forwarding-table [PREFIX|ADDRESS]`, `show fib summary`, `show bmp`, `show validation session`,
    /// `show validation database [prefix P] [origin-as N]`, `show thread cpu`, `show
    /// work-queues`, `show log level`, `show configuration`.
    Show {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        words: Vec<String>,
    },
    /// Compare the kernel's routing table with the Loc-RIB.
    ///
    /// `fib verify`: every difference between the kernel's table and what the Loc-RIB's
    /// best paths ask is listed (exit status 1 if there is one).
    Fib {
        #[arg(trailing_var_arg = true, required = true)]
        words: Vec<String>,
    },
    /// Reset or refresh sessions.
    ///
    /// `clear bgp neighbor ADDRESS|all [soft|soft-inbound]`: hard (Cease / Administrative
    /// Reset), soft (our routes sent again) or soft-inbound (a ROUTE-REFRESH asked of it).
    Clear {
        #[arg(trailing_var_arg = true, required = true)]
        words: Vec<String>,
    },
    /// Stop the running daemon and start it again on its configuration file.
    ///
    /// The file is checked first (a file with errors: nothing stops). Without `--graceful`
    /// every neighbor is sent Cease / Administrative Shutdown; with it (`[bgp.graceful-restart]`,
    /// RFC 4724) the sessions close without NOTIFICATION to the neighbors that keep our routes,
    /// the kernel's routes stay, and the new process advertises once every neighbor has sent
    /// End-of-RIB. The answer names the neighbors that keep our routes and those that do not.
    Restart {
        #[arg(long)]
        graceful: bool,
    },
    /// Take a neighbor out of service (Junos deactivate).
    ///
    /// `disable bgp neighbor ADDRESS|all`: Cease / Administrative Shutdown, and no session
    /// (connections refused) until `enable`, the next reload or a restart; `disable = true`
    /// in the file keeps it across both.
    Disable {
        #[arg(trailing_var_arg = true, required = true)]
        words: Vec<String>,
    },
    /// Put a disabled neighbor back in service.
    ///
    /// `enable bgp neighbor ADDRESS|all`: ends a `disable`.
    Enable {
        #[arg(trailing_var_arg = true, required = true)]
        words: Vec<String>,
    },
    /// Reload the configuration file.
    ///
    /// `configure reload [--dry-run]`: read the configuration file again, as SIGHUP does,
    /// and say what changed (or every error, as file:line: key: reason; exit status 1);
    /// `--dry-run`: what would change, which neighbors would be reset and why, changing
    /// nothing.
    Configure {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        words: Vec<String>,
    },
    /// Follow route changes or the log of the running daemon.
    ///
    /// `monitor route [PREFIX|ADDRESS] [neighbor A] [community C] [large-community C]`
    /// prints each best-path change as the shards decide it (JSON lines with --json);
    /// `monitor log` prints every line the daemon logs. Until interrupted.
    Monitor {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        words: Vec<String>,
    },
    /// Change what the running daemon logs.
    ///
    /// `set log level error|warn|info|debug|trace [neighbor ADDRESS]`: from now until the
    /// daemon stops, for the whole daemon or for one neighbor's events only.
    Set {
        #[arg(trailing_var_arg = true, required = true)]
        words: Vec<String>,
    },
    /// Advise how many shard and update threads to run here.
    ///
    /// Whether RIB sharding and update threading pay on this machine, and with how many
    /// threads: weighs the CPUs (cores, SMT, NUMA and NICs, governor, load), the running
    /// daemon's workload when one answers on --socket, and ribshard's measurements.
    Advise,
    /// Check or print configuration files.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Work with MRT files (RFC 6396).
    Mrt {
        #[command(subcommand)]
        command: MrtCommand,
    },
    /// Print a shell's completions for ribshard.
    ///
    /// `source <(ribshard completions bash)`; the package installs them for bash, zsh and
    /// fish.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the manual pages into a directory.
    ///
    /// ribshard.8, a page per command (ribshard-show.8, ...) and ribshard.toml.5, from
    /// these definitions and the annotated example configuration (the package build
    /// does).
    Man {
        #[arg(long, default_value = "target/man")]
        out: PathBuf,
    },
    /// Routing policy of a configuration file, offline.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Run policies (a chain, as `import` or `export` lists them) against a route: prints
    /// the term that decided and the attributes the route leaves with.
    Test {
        /// The policies, in order (policy-statement names, or accept / reject /
        /// route-server-control).
        #[arg(required = true)]
        policies: Vec<String>,
        /// The configuration file whose [policy-options] they are in.
        #[arg(long, short, default_value = config::DEFAULT_FILE)]
        config: PathBuf,
        /// The route's prefix, as 198.51.100.0/24.
        #[arg(long)]
        prefix: String,
        /// Its AS path, as "65001 13335" (the neighbor's AS first).
        #[arg(long, default_value = "")]
        as_path: String,
        /// A community it carries: 65000:100, no-export, target:65000:1, large:65000:1:2.
        #[arg(long = "community")]
        communities: Vec<String>,
        /// The neighbor it was learned from.
        #[arg(long, default_value = "192.0.2.2")]
        neighbor: std::net::IpAddr,
        /// That neighbor's AS (default: the AS path's first, else ours).
        #[arg(long)]
        peer_as: Option<u32>,
        /// Learned over iBGP (then falling off the chain's end accepts; else it rejects,
        /// RFC 8212).
        #[arg(long)]
        internal: bool,
        /// Its next hop (default: the neighbor).
        #[arg(long)]
        next_hop: Option<std::net::IpAddr>,
        #[arg(long)]
        local_preference: Option<u32>,
        /// MULTI_EXIT_DISC.
        #[arg(long)]
        med: Option<u32>,
        /// igp, egp or incomplete.
        #[arg(long, default_value = "igp")]
        origin: String,
        /// For an export chain with route-server-control: the receiving neighbor's AS.
        #[arg(long)]
        receiver_as: Option<u32>,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Check a configuration file; every error names the file, line and key.
    Check {
        /// The configuration file (TOML).
        #[arg(default_value = config::DEFAULT_FILE)]
        file: PathBuf,
    },
    /// Print an annotated, complete example configuration.
    Example,
    /// What loading this file into the running daemon would change: every neighbor that
    /// would be reset and why, what applies with sessions kept, what waits for a restart.
    /// Nothing changes (`configure reload --dry-run` with another file).
    Diff {
        /// The configuration file to compare (read by the daemon).
        file: PathBuf,
    },
}

#[derive(Subcommand)]
enum MrtCommand {
    /// Inject a TABLE_DUMP_V2 RIB into the running daemon: each of its peers becomes a
    /// source of routes, as a neighbor (never installed in the kernel).
    Inject {
        /// The MRT file (read by the daemon).
        file: PathBuf,
    },
    /// Withdraw every route an injected file brought.
    Remove { file: PathBuf },
    /// The files injected, with their peers and routes.
    Injections,
    /// Write the running daemon's Loc-RIB (or a neighbor's Adj-RIB-In) as a TABLE_DUMP_V2
    /// file, read shard by shard without stalling routing (`bgpdump -m` reads it).
    DumpRib {
        /// Where to write it.
        file: PathBuf,
        /// The neighbor whose Adj-RIB-In (as received, before import policy) to write.
        #[arg(long)]
        neighbor: Option<String>,
    },
    /// Print every route, withdrawal and state change of an MRT file (gzip, bzip2 or plain)
    /// in the one-line format of `bgpdump -m`.
    Dump {
        /// The MRT file.
        file: PathBuf,
    },
    /// Write a synthesized TABLE_DUMP_V2 RIB file (deterministic for a seed).
    Generate {
        /// Where to write the file.
        #[arg(long, short)]
        out: PathBuf,
        /// Number of distinct IPv4 prefixes.
        #[arg(long, default_value_t = 100_000)]
        prefixes: usize,
        /// Number of peers, each with a path for every prefix.
        #[arg(long, default_value_t = 2)]
        peers: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

/// The global flags moved in front of the subcommand: `show`, `clear`, `fib` and
/// `configure` take the rest of the line as words, where clap would not see a `--json` or
/// `--socket` typed last, as users type them.
fn hoist_global_flags(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args = args.into_iter();
    let mut front: Vec<OsString> = args.next().into_iter().collect();
    let mut rest = Vec::new();
    while let Some(a) = args.next() {
        match a.to_str() {
            Some("--json" | "--log-json") => front.push(a),
            Some(s) if s.starts_with("--socket=") => front.push(a),
            Some("--socket") => match args.next() {
                Some(v) => front.extend([a, v]),
                None => rest.push(a),
            },
            _ => rest.push(a),
        }
    }
    front.extend(rest);
    front
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(hoist_global_flags(std::env::args_os()));
    // The client commands log nothing; their errors go to stderr as words.
    if !matches!(
        cli.command,
        Command::Show { .. }
            | Command::Clear { .. }
            | Command::Configure { .. }
            | Command::Fib { .. }
            | Command::Monitor { .. }
            | Command::Disable { .. }
            | Command::Enable { .. }
            | Command::Set { .. }
            | Command::Advise
            | Command::Restart { .. }
            | Command::Completions { .. }
            | Command::Man { .. }
            | Command::Mrt {
                command: MrtCommand::Inject { .. }
                    | MrtCommand::Remove { .. }
                    | MrtCommand::Injections
                    | MrtCommand::DumpRib { .. }
            }
    ) {
        ribshard::logging::init(cli.log_json);
    }
    match cli.command {
        Command::Run {
            config,
            dump_updates,
        } => {
            let checked = config::load(&config);
            for w in &checked.warnings {
                tracing::warn!("{w}");
            }
            let c = match checked.config {
                Ok(c) => c,
                Err(errors) => {
                    eprintln!("{errors}");
                    return ExitCode::FAILURE;
                }
            };
            let opts = ribshard::run::Options {
                dump_updates,
                config_file: Some(config),
            };
            match ribshard::run::run(c, opts) {
                Ok(ribshard::restart::Exit::Stopped) => ExitCode::SUCCESS,
                Ok(ribshard::restart::Exit::Restart) => {
                    tracing::info!("starting again");
                    let e = ribshard::restart::exec_again();
                    tracing::error!("cannot start again: {e}");
                    ExitCode::FAILURE
                }
                Err(e) => {
                    tracing::error!("{e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Show { words } => client(&cli.socket, cli.json, ribshard::cli::parse_show(&words)),
        Command::Fib { words } => client(&cli.socket, cli.json, ribshard::cli::parse_fib(&words)),
        Command::Clear { words } => {
            client(&cli.socket, cli.json, ribshard::cli::parse_clear(&words))
        }
        Command::Configure { words } => client(
            &cli.socket,
            cli.json,
            ribshard::cli::parse_configure(&words),
        ),
        Command::Monitor { words } => {
            client(&cli.socket, cli.json, ribshard::cli::parse_monitor(&words))
        }
        Command::Disable { words } => client(
            &cli.socket,
            cli.json,
            ribshard::cli::parse_disable(&words, false),
        ),
        Command::Enable { words } => client(
            &cli.socket,
            cli.json,
            ribshard::cli::parse_disable(&words, true),
        ),
        Command::Set { words } => client(&cli.socket, cli.json, ribshard::cli::parse_set(&words)),
        Command::Advise => advise(&cli.socket, cli.json),
        Command::Restart { graceful } => client(
            &cli.socket,
            cli.json,
            Ok(ribshard::cli::Request::Restart(
                ribshard_mgmt::api::RestartRequest { graceful },
            )),
        ),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "ribshard", &mut io::stdout());
            ExitCode::SUCCESS
        }
        Command::Man { out } => match ribshard::manual::write_pages(Cli::command(), &out) {
            Ok(pages) => {
                for p in pages {
                    println!("{}", p.display());
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{}: {e}", out.display());
                ExitCode::FAILURE
            }
        },
        Command::Config { command } => config_command(command, &cli.socket, cli.json),
        Command::Policy { command } => policy_command(command, cli.json),
        Command::Mrt { command } => mrt(&cli.socket, cli.json, command),
    }
}

/// A file as the daemon must find it: absolute (it does not run where we do).
fn absolute(file: &Path) -> Result<String, ribshard::cli::Usage> {
    std::fs::canonicalize(file)
        .map(|p| p.display().to_string())
        .map_err(|e| ribshard::cli::Usage(format!("{}: {e}", file.display())))
}

/// Asks the running daemon and prints its answer.
fn client(
    socket: &str,
    json: bool,
    request: Result<ribshard::cli::Request, ribshard::cli::Usage>,
) -> ExitCode {
    let request = match request {
        Ok(r) => r,
        Err(e) => {
            eprintln!("usage: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(rt) = client_runtime() else {
        return ExitCode::FAILURE;
    };
    let endpoint = ribshard::cli::endpoint(socket);
    match rt.block_on(ribshard::cli::execute(endpoint, request, json)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The one-thread runtime the API's client commands run on (an error said).
fn client_runtime() -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| eprintln!("{e}"))
        .ok()
}

fn advise(socket: &str, json: bool) -> ExitCode {
    use ribshard::advise;
    let machine = advise::machine::Machine::read(Path::new("/sys"), Path::new("/proc"));
    let Some(rt) = client_runtime() else {
        return ExitCode::FAILURE;
    };
    let workload = match rt.block_on(advise::workload(ribshard::cli::endpoint(socket))) {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!("no running daemon at {socket} ({e}): advising from the machine alone");
            None
        }
    };
    let measured = advise::measured::measured();
    let a = advise::advise(&machine, workload.as_ref(), &measured);
    if json {
        let v = serde_json::json!({
            "machine": machine,
            "workload": workload,
            "measured": measured,
            "advice": a,
        });
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print!("{}", advise::render(&machine, workload.as_ref(), &a));
    }
    ExitCode::SUCCESS
}

fn policy_command(command: PolicyCommand, json: bool) -> ExitCode {
    let PolicyCommand::Test {
        policies,
        config: file,
        prefix,
        as_path,
        communities,
        neighbor,
        peer_as,
        internal,
        next_hop,
        local_preference,
        med,
        origin,
        receiver_as,
    } = command;
    let checked = config::load(&file);
    let c = match checked.config {
        Ok(c) => c,
        Err(errors) => {
            eprintln!("{errors}");
            return ExitCode::FAILURE;
        }
    };
    let peer_as = peer_as.or_else(|| as_path.split_whitespace().next()?.parse().ok());
    let route = ribshard::policy_test::Route {
        prefix,
        as_path,
        communities,
        neighbor,
        peer_as,
        internal,
        next_hop,
        local_preference,
        med,
        origin,
        receiver_as,
    };
    match ribshard::policy_test::test(&c, &policies, &route) {
        Ok(report) if json => match serde_json::to_string_pretty(&report) {
            Ok(j) => {
                println!("{j}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Ok(report) => {
            print!("{}", report.text());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn config_command(command: ConfigCommand, socket: &str, json: bool) -> ExitCode {
    match command {
        ConfigCommand::Diff { file } => client(
            socket,
            json,
            absolute(&file).map(|f| {
                ribshard::cli::Request::Reload(ribshard_mgmt::api::ReloadRequest {
                    dry_run: true,
                    file: Some(f),
                })
            }),
        ),
        ConfigCommand::Example => {
            print!("{}", config::EXAMPLE);
            ExitCode::SUCCESS
        }
        ConfigCommand::Check { file } => {
            let checked = config::load(&file);
            // Errors and warnings in the file's order, each on its line.
            let mut lines: Vec<(usize, String)> = checked
                .warnings
                .iter()
                .map(|w| (w.line.unwrap_or(0), w.to_string()))
                .collect();
            if let Err(errors) = &checked.config {
                lines.extend(
                    errors
                        .0
                        .iter()
                        .map(|e| (e.line.unwrap_or(0), e.to_string())),
                );
            }
            lines.sort_by_key(|(l, _)| *l);
            for (_, l) in &lines {
                eprintln!("{l}");
            }
            check_outcome(&file, checked.config)
        }
    }
}

/// `config check`'s last line: what the file configures, or how many errors it has.
fn check_outcome(
    file: &std::path::Path,
    config: Result<config::Config, config::Errors>,
) -> ExitCode {
    match config {
        Ok(c) => {
            println!(
                    "{}: OK: AS {}, router id {}, {} neighbor(s) in {} group(s), {} shard(s), {} update thread(s)",
                    file.display(),
                    c.local_as,
                    c.router_id,
                    c.peers.len(),
                    c.peers.iter().map(|p| &p.group).collect::<std::collections::HashSet<_>>().len(),
                    c.threading.shards,
                    c.threading.update_threads
                );
            ExitCode::SUCCESS
        }
        Err(errors) => {
            eprintln!(
                "{}: {} error(s): not loaded",
                file.display(),
                errors.0.len()
            );
            ExitCode::FAILURE
        }
    }
}

/// `mrt ...`: files here, or the running daemon's RIB.
fn mrt(socket: &str, json: bool, command: MrtCommand) -> ExitCode {
    use ribshard::cli::Request;
    let local = match command {
        MrtCommand::Inject { file } => {
            return client(socket, json, absolute(&file).map(Request::MrtInject))
        }
        MrtCommand::Remove { file } => {
            return client(socket, json, absolute(&file).map(Request::MrtRemove))
        }
        MrtCommand::Injections => return client(socket, json, Ok(Request::MrtInjections)),
        MrtCommand::DumpRib { file, neighbor } => {
            return client(socket, json, Ok(Request::MrtDumpRib { file, neighbor }))
        }
        MrtCommand::Dump { file } => mrt_dump(&file),
        MrtCommand::Generate {
            out,
            prefixes,
            peers,
            seed,
        } => mrt_generate(&out, prefixes, peers, seed),
    };
    match local {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe (`ribshard mrt dump f | head`) is not an error.
        Err(e)
            if e.downcast_ref::<io::Error>().map(|e| e.kind())
                == Some(io::ErrorKind::BrokenPipe) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// `mrt dump FILE`: every record as `bgpdump -m` prints it.
fn mrt_dump(file: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let result = ribshard_mrt::bgpdump::dump_file(file, &mut out);
    out.flush()?;
    let (records, skipped) = result.map_err(|e| match e {
        ribshard_mrt::MrtError::Io(io) => Box::new(io) as Box<dyn std::error::Error>,
        other => format!("{}: {other}", file.display()).into(),
    })?;
    if skipped > 0 {
        tracing::warn!(
            file = %file.display(),
            records,
            skipped,
            "some records or messages could not be decoded and were left out"
        );
    }
    Ok(())
}

/// `mrt generate`: a synthesized RIB file.
fn mrt_generate(
    out: &Path,
    prefixes: usize,
    peers: usize,
    seed: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    if peers == 0 || peers > usize::from(u16::MAX) {
        return Err("--peers must be between 1 and 65535".into());
    }
    let f =
        std::fs::File::create(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut w = ribshard_mrt::MrtWriter::new(BufWriter::new(f));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0);
    let paths = ribshard_mrt::synth::write_table(&mut w, prefixes, peers, seed, now)?;
    w.flush()?;
    tracing::info!(file = %out.display(), prefixes, peers, paths, "wrote RIB dump");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Cli {
        Cli::try_parse_from(hoist_global_flags(
            line.split_whitespace().map(OsString::from),
        ))
        .unwrap()
    }

    #[test]
    fn global_flags_count_anywhere_on_the_line() {
        let c = parse("ribshard show bgp summary --json --socket /tmp/s");
        assert!(c.json);
        assert_eq!(c.socket, "/tmp/s");
        assert!(matches!(&c.command, Command::Show { words } if words == &["bgp", "summary"]));
        let c = parse("ribshard clear bgp neighbor all --socket=127.0.0.1:9 soft");
        assert_eq!(c.socket, "127.0.0.1:9");
        assert!(
            matches!(&c.command, Command::Clear { words } if words == &["bgp", "neighbor", "all", "soft"])
        );
        let c = parse("ribshard policy test in --prefix 192.0.2.0/24 --json");
        assert!(c.json);
        let c = parse("ribshard --json show route 192.0.2.0/24 detail");
        assert!(c.json && matches!(&c.command, Command::Show { words } if words.len() == 3));
    }
}
