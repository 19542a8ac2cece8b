//! `volee`: supervise AI coding agents from inside tmux. Parses, dispatches, prints errors.

mod agent_cmd;
mod agent_import;
mod agent_loop;
mod agent_retention;
mod agent_rewind;
mod agent_seed_store;
mod agent_sync;
mod agent_tags;
mod ask;
mod attach;
mod browse;
mod caller;
mod commands;
mod doctor;
mod error;
mod hook;
mod instrument;
mod launch;
mod launch_plan;
mod machine_cmd;
mod machine_install;
mod manual;
mod mcp;
mod on_machine;
mod output;
mod pane_exec;
mod probe;
mod profiles;
mod program;
mod restore;
mod resurrect;
mod send;
mod serve;
mod sessions_cmd;
mod setup;
mod tmux_ui;
mod worktree;
mod zellij_ui;

use std::path::PathBuf;

use clap::{CommandFactory, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "volee",
    version,
    about = "Supervise AI coding agents in tmux: which one needs you, what each is doing, how to get back to it",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the daemon, load volee's tmux integration and attach to a session ready to launch agents.
    Up {
        /// Do not attach; just set everything up.
        #[arg(long)]
        no_attach: bool,
    },
    /// Undo `volee up`: remove volee's key bindings and options, restore the status line, stop the daemon.
    Down,
    /// Start an agent in a new tmux window (or zellij tab); prints its id.
    #[command(after_help = "Examples:
  volee launch -- python3 my_agent.py                 any command line (the generic profile)
  volee launch --harness claude --name fix-auth 'fix the login bug'
  volee launch --harness claude --host zellij:work    in a new tab of zellij session work
  volee launch --on box --harness codex --worktree wt  on machine box, in a new worktree there")]
    Launch(launch::LaunchArgs),
    /// volee's own agent (Ollama + a Docker sandbox) in this pane; --prompt for one turn; manage its sessions.
    #[command(
        after_help = "Sessions live in $XDG_DATA_HOME/volee/sessions (~/.local/share/volee/sessions), or in
$VOLEE_HOME/data/sessions when VOLEE_HOME is set; --memory-dir PATH uses another store. volee keeps
them with its other data (XDG), in its own format with a writer lock and atomic checkpoints
(docs/store.md), so it does not use the seed harness's ~/.agent-harness/memory and reads nothing
there; a file in volee's export format comes in with --import FILE."
    )]
    Agent(Box<agent_cmd::AgentArgs>),
    /// Browse live agents and past sessions: filter as you type, / full text, a preview; Enter
    /// jumps to an agent or resumes a session.
    Browse(browse::BrowseArgs),
    /// Every harness's past sessions: list them, search their messages, show one.
    Sessions(sessions_cmd::SessionsArgs),
    /// Machines reached over ssh: add (checked), ls (asked now), rm.
    Machine(machine_cmd::MachineArgs),
    /// List agents (launched and discovered); --all adds ended ones.
    #[command(after_help = "Examples:
  volee ls                  live agents: state, for how long, source, where
  volee ls --all --on box   ended ones too, of machine box only
  volee ls --json | jq '.[] | select(.state == \"needs_you\") | .id'
  volee ls --rescan         find agents started outside volee first")]
    Ls {
        /// Ended agents too.
        #[arg(long)]
        all: bool,
        /// Scan /proc for agents started outside volee before listing.
        #[arg(long)]
        rescan: bool,
        /// Print JSON: an array of agent objects (the command contract).
        #[arg(long)]
        json: bool,
        /// Only the agents of this machine (`volee machine add`).
        #[arg(long, value_name = "MACHINE")]
        on: Option<String>,
        /// More columns: TOKENS (what each agent's harness recorded: input + output + cache
        /// writes, `+` cache reads; `?` unknown).
        #[arg(long)]
        wide: bool,
    },
    /// Show one agent.
    Show {
        /// The agent: its id, a unique prefix of it, or its name.
        id: String,
        /// Print JSON (the agent object of the command contract).
        #[arg(long)]
        json: bool,
    },
    /// Why an agent is in its state: every source's latest observation, the rule that decided, and
    /// where its screen is read (a tmux pane's screen model, with its checks against tmux).
    Explain {
        /// The agent: its id, a unique prefix of it, or its name.
        id: String,
        /// Print JSON (the explanation object of the command contract).
        #[arg(long)]
        json: bool,
    },
    /// Wait until an agent reaches one of the states; prints the state it ends in.
    #[command(after_help = "Examples:
  volee wait k3f9 --until needs_you,idle          block until it needs you or ends its turn
  volee wait fix-auth --until done,failed --timeout 600
  volee wait k3f9 --until failed:usage_limit     exit 5 if it fails for another reason
  volee wait k3f9 --until needs_you && volee attach k3f9")]
    Wait {
        /// The agent: its id, a unique prefix of it, or its name.
        id: String,
        /// States to wait for, comma-separated (working, needs_you, idle, done, failed, stopped),
        /// each perhaps with its reason (failed:usage_limit, needs_you:permission; see `volee
        /// explain`).
        #[arg(long, value_name = "STATE[:REASON][,…]")]
        until: String,
        /// Give up after this many seconds (exit 1).
        #[arg(long, value_name = "SECS")]
        timeout: Option<f64>,
    },
    /// Relaunch an ended agent with its harness's resume line (the generic profile reruns its command).
    Resume {
        /// The agent: its id, a unique prefix of it, or its name.
        id: String,
        /// Print JSON (the agent object of the command contract).
        #[arg(long)]
        json: bool,
        /// Give it volee's MCP tools (as `launch --join`); kept anyway when it had them.
        #[arg(long)]
        join: bool,
    },
    /// Bring back agents stopped because their tmux server went away (killed, crashed, a
    /// reboot): into the same session, window and cwd, with the same name and id, resumed with
    /// their own conversation.
    #[command(after_help = "Examples:
  volee restore --all --dry-run     what would come back, and what cannot (and why)
  volee restore --all
  volee restore k3f9 fix-auth       these two only

Restorable agents show restorable: true in volee ls --all --json; they are kept until restored
or removed (volee rm). volee resume ID is different: it starts a new agent beside you.
With tmux-resurrect, volee tmux-init sets its @resurrect-hook-post-restore-all to
volee restore --all --into-resurrect: a resurrect restore brings the agents back in their panes.")]
    Restore {
        /// The agents (ids, prefixes or names); or --all.
        ids: Vec<String>,
        /// Every restorable agent.
        #[arg(long, conflicts_with = "ids")]
        all: bool,
        /// Print the plan (and what cannot be restored, and why); change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Print JSON: one object per agent (action, note, session, window, cwd, the agent
        /// after the restore).
        #[arg(long)]
        json: bool,
        /// After a tmux-resurrect restore (its post-restore-all hook, which volee tmux-init
        /// sets): only this tmux server's agents, each run in the pane resurrect restored in its
        /// place (its shell, or its program typed back) instead of a new pane beside it.
        #[arg(long)]
        into_resurrect: bool,
        /// Put them all in this session instead of each in its own place: `tmux:SESSION`, or
        /// `zellij[:SESSION]` (a new tab each; the way back for a killed zellij session's
        /// agents; `zellij` alone: the zellij session you are in).
        #[arg(long, value_name = "tmux:SESSION|zellij[:SESSION]")]
        host: Option<String>,
    },
    /// Bring this terminal to the agent's pane (inside tmux: switch; outside: attach; MACHINE:ID:
    /// attach there over volee's ssh connection).
    #[command(after_help = "Examples:
  volee attach k3f9         inside tmux: switch this client there; outside: attach to it
  volee attach fix-auth     by name
  volee attach box:k3f9     an agent on machine box (over volee's ssh connection to it)
  volee attach $(volee ls --json | jq -r '[.[] | select(.state == \"needs_you\")][0].id')")]
    Attach {
        /// The agent: its id, a unique prefix of it, or its name.
        id: String,
    },
    /// End the agent and its whole process group (state `stopped`).
    Stop {
        /// The agent: its id, a unique prefix of it, or its name.
        id: String,
        /// Also remove its git worktree — only when that loses no uncommitted change and no
        /// commit that no other branch or remote ref has.
        #[arg(long)]
        remove_worktree: bool,
        /// With --remove-worktree: delete its branch too.
        #[arg(long)]
        delete_branch: bool,
    },
    /// Interrupt the current turn without ending the agent.
    Interrupt {
        /// The agent: its id, a unique prefix of it, or its name.
        id: String,
    },
    /// The tokens (and cost) of every agent volee watched, summed from its ledger (kept in the
    /// state directory across restarts): by harness, agent, model or project.
    #[command(after_help = "Examples:
  volee usage                       everything so far, by harness
  volee usage --since 1d --by agent the last day, per agent
  volee usage --by model --json")]
    Usage {
        /// Only what was used in this last while (`90m`, `1d`, `7days`).
        #[arg(long, value_name = "DURATION")]
        since: Option<String>,
        /// Group by `harness` (default), `agent`, `model` or `project`.
        #[arg(long, value_name = "KEY", default_value = "harness", value_parser = ["harness", "agent", "model", "project"])]
        by: String,
        /// Print JSON: one object per group.
        #[arg(long)]
        json: bool,
    },
    /// An agent's budget (tokens or money): raise it, set it or take it off. An agent held at its budget
    /// is let go when raised past what it used (you type its next prompt).
    #[command(after_help = "Examples:
  volee budget k3f9 +50k     50,000 tokens more (no budget yet: 50,000 more than it used)
  volee budget k3f9 200k     exactly 200,000 tokens
  volee budget k3f9 +2usd    $2 more (a budget in tokens becomes one in money)
  volee budget k3f9 5usd     exactly $5 at the price table's prices for its model
  volee budget k3f9 off      no budget")]
    Budget {
        /// The agent: its id, a unique prefix of it, or its name.
        id: String,
        /// `+AMOUNT`, `AMOUNT` or `off` (tokens: 12000, 200k, 1.5M; money: 5usd, $2.50).
        #[arg(allow_hyphen_values = true)]
        amount: String,
        /// Print the agent object as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Type a prompt or an answer into the agent (its profile's input rules) and confirm it reacted.
    #[command(after_help = "Examples:
  volee send k3f9 y                                answer its (y/n) prompt
  volee send fix-auth 'now run the tests and fix what fails'
  volee send k3f9 --wait 30 'summarise what you changed'")]
    Send {
        /// The agent: its id, a unique prefix of it, or its name.
        id: String,
        /// What to type: a prompt, or an answer such as `y` or `1` (typed as keys).
        text: String,
        /// How many seconds to wait for the agent to react (exit 1 when it does not).
        #[arg(long, value_name = "SECS", default_value_t = 5)]
        wait: u64,
        /// Type TEXT as it is: control characters (a carriage return submits, ESC starts a key
        /// sequence) and line breaks outside a paste are kept.
        #[arg(long)]
        raw: bool,
    },
    /// Check tmux, zellij, Docker, Ollama and every installed harness against its profile.
    Doctor,
    /// Run the installed harness in a private tmux with a throwaway HOME and compare it with its profile.
    #[command(after_help = "Examples:
  volee probe claude                     compare the installed Claude Code with its profile
  volee probe --new pi pi --out ~/.config/volee/profiles
                                          draft a profile for a harness volee has none for

--new runs PROGRAM in a private tmux server with a throwaway HOME and writes NAME.toml (a draft:
version, flags found in its --help, processes, a rule from its first screen) and
NAME-01-start.txt (that screen and title, in the fixtures' format) into --out (default: the
current directory). Review the draft, then: volee profiles check NAME.toml")]
    Probe {
        /// The harness profile's name (see `volee profiles`); with --new, the new harness's name.
        harness: String,
        /// Draft a profile for a harness volee has none for, from what PROGRAM shows.
        #[arg(long = "new", value_name = "PROGRAM")]
        new: Option<String>,
        /// Where --new writes its draft and capture (default: the current directory).
        #[arg(long, value_name = "DIR", requires = "new")]
        out: Option<std::path::PathBuf>,
    },
    /// The harness profiles and the versions they were measured on; `check` a profile file,
    /// `show` the one in effect.
    #[command(after_help = "Examples:
  volee profiles                          every harness, its measured versions and state sources
  volee profiles check ~/.config/volee/profiles/pi.toml
  volee profiles show claude --toml       the profile in effect, as a file says it
  volee profiles import-herdr ~/.config/herdr/agent-detection/claude.toml > ~/.config/volee/rules/claude.toml

A profile file in the config dir's profiles/ (NAME.toml) overrides the built-in profile of that
name or adds a harness (docs/profiles.md).")]
    Profiles {
        #[command(subcommand)]
        action: Option<ProfilesAction>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Give a harness volee's hooks where it keeps them in one file of the user's (Cursor's
    /// `~/.cursor/hooks.json`): a backup first, every other entry kept; `--undo` (or `volee down`)
    /// takes them out again.
    Setup {
        /// The harness (`cursor`).
        harness: String,
        /// Take volee's hooks out again.
        #[arg(long)]
        undo: bool,
    },
    /// Entry point for harness hooks (JSON on stdin); always fast, never fails the harness.
    Hook {
        /// The harness whose hook runs.
        harness: String,
        /// Its event name (`Stop`, `Notification`, …).
        event: String,
    },
    /// No notifications for a while (default 1h; "off" turns them back on now).
    Quiet {
        /// How long (`30m`, `2h`), or `off`.
        #[arg(value_name = "DURATION|off")]
        duration: Option<String>,
    },
    /// volee's MCP server over stdio: tools to list agents, explain a state, wait for one, send
    /// one a message and read its screen (what `launch --join` gives a harness).
    Mcp,
    /// Print the last lines of the agent's screen, escape sequences removed.
    Peek {
        /// The agent: its id, a unique prefix of it, or its name.
        id: String,
        /// How many lines, from the bottom.
        #[arg(short = 'n', long, default_value_t = 20)]
        lines: u32,
    },
    /// Forget an ended agent (and close its dead pane).
    Rm {
        /// The agent: its id, a unique prefix of it, or its name.
        id: String,
    },
    /// Forget every ended agent older than the configured retention.
    Prune,
    /// One-line summary: counts by state.
    Status {
        /// `plain` text, `tmux` (with its style codes) or `json`.
        #[arg(long, value_enum, default_value_t = commands::StatusFormat::Plain)]
        format: commands::StatusFormat,
    },
    /// Run the daemon (normally started on demand), or stop it.
    Daemon {
        #[command(subcommand)]
        action: Option<DaemonAction>,
        /// Stay in the foreground and log to stderr too.
        #[arg(long)]
        foreground: bool,
    },
    /// Install volee's options, key bindings and status line into a tmux server (idempotent).
    TmuxInit {
        /// The tmux server's socket (default: the one you are in, else tmux's default).
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// The picker: a tmux menu of agents that switches to the chosen one (bound to a key).
    Pick {
        /// The tmux server's socket (default: the one you are in).
        #[arg(long)]
        socket: Option<PathBuf>,
        /// The tmux client to show the menu on.
        #[arg(long)]
        client: Option<String>,
    },
    /// Switch to the next agent that needs you (bound to a key).
    Next {
        /// The tmux server's socket (default: the one you are in).
        #[arg(long)]
        socket: Option<PathBuf>,
        /// The tmux client to switch.
        #[arg(long)]
        client: Option<String>,
    },
    /// Print the shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) of volee, or of one command: `volee man launch | man -l -`.
    Man {
        /// A command (default: the whole of volee).
        command: Option<String>,
    },
    /// Launch the command line typed at the tmux launch prompt (bound to a key).
    #[command(hide = true)]
    LaunchLine {
        #[arg(long)]
        socket: PathBuf,
        #[arg(long)]
        pane: String,
        #[arg(long)]
        client: Option<String>,
    },
    /// Internal: what `ssh` runs on a machine: says its protocol and version, then serves stdin.
    #[command(hide = true)]
    Serve {
        /// Speak on stdin/stdout (the only way).
        #[arg(long, required = true)]
        stdio: bool,
    },
    /// Internal: the first process of an agent pane; takes the caller's environment and execs the command.
    #[command(hide = true)]
    PaneExec {
        env_file: PathBuf,
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
}

#[derive(Subcommand)]
enum ProfilesAction {
    /// Check profile files: unknown keys, bad patterns, templates with unknown fields, each
    /// with its line; exit 2 when one has a problem.
    Check {
        /// Profile files (`NAME.toml`, named after the harness they describe).
        #[arg(required = true)]
        files: Vec<std::path::PathBuf>,
    },
    /// Convert a herdr agent-detection manifest into volee screen rules: a rules file on
    /// standard output (for the config dir's rules/NAME.toml), what did not map in its comments
    /// and on standard error.
    ImportHerdr {
        /// The manifest (herdr's `<agent>.toml`).
        file: std::path::PathBuf,
    },
    /// The profile in effect for a harness (built-in, or the user's file over it).
    Show {
        /// The harness (see `volee profiles`).
        name: String,
        /// As a profile file (the default).
        #[arg(long, conflicts_with = "json")]
        toml: bool,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum DaemonAction {
    /// Stop the running daemon (agents keep running and are found again on the next start).
    Stop,
}

fn main() {
    let cli = Cli::parse();
    // Harness profiles: the built-in ones, and the user's in the config dir.
    volee_harness::use_profiles_dir(ask::paths().config_dir.join("profiles"));
    let result = match cli.command {
        Command::Up { no_attach } => tmux_ui::up(no_attach),
        Command::Down => tmux_ui::down(),
        Command::Setup { harness, undo } => setup::setup(&harness, undo),
        Command::Mcp => mcp::serve(),
        Command::Quiet { duration } => commands::quiet(duration.as_deref()),
        Command::Launch(args) => launch::launch(args),
        Command::Agent(args) => agent_cmd::run(*args),
        Command::Machine(args) => machine_cmd::run(args),
        Command::Serve { stdio: _ } => machine_cmd::serve_stdio(),
        Command::Ls {
            all,
            json,
            rescan,
            on,
            wide,
        } => commands::ls(all, json, rescan, on.as_deref(), wide),
        Command::Show { id, json } => commands::show(&id, json),
        Command::Explain { id, json } => commands::explain(&id, json),
        Command::Wait { id, until, timeout } => commands::wait(&id, &until, timeout),
        Command::Attach { id } => attach::attach(&id),
        Command::Resume { id, json, join } => launch::resume(&id, json, join),
        Command::Restore {
            ids,
            all,
            dry_run,
            json,
            into_resurrect,
            host,
        } => restore::restore_to(&ids, all, dry_run, json, into_resurrect, host.as_deref()),
        Command::Stop {
            id,
            remove_worktree,
            delete_branch,
        } => commands::stop_and_remove(&id, remove_worktree, delete_branch),
        Command::Interrupt { id } => commands::interrupt(&id),
        Command::Budget { id, amount, json } => commands::budget(&id, &amount, json),
        Command::Usage { since, by, json } => commands::usage(since.as_deref(), &by, json),
        Command::Send {
            id,
            text,
            wait,
            raw,
        } => send::send(&id, &text, raw, std::time::Duration::from_secs(wait)),
        Command::Profiles { action, json } => match action {
            None => profiles::profiles(json),
            Some(ProfilesAction::Check { files }) => profiles::check(&files),
            Some(ProfilesAction::Show {
                name,
                toml: _,
                json,
            }) => profiles::show(&name, json),
            Some(ProfilesAction::ImportHerdr { file }) => profiles::import_herdr(&file),
        },
        Command::Doctor => doctor::doctor(),
        Command::Probe {
            harness,
            new: None,
            out: _,
        } => probe::probe(&harness),
        Command::Probe {
            harness,
            new: Some(program),
            out,
        } => probe::probe_new(&harness, &program, out.as_deref()),
        Command::Hook { harness, event } => hook::hook(&harness, &event),
        Command::Peek { id, lines } => commands::peek(&id, lines),
        Command::Rm { id } => commands::rm(&id),
        Command::Prune => commands::prune(),
        Command::Sessions(args) => sessions_cmd::run(args),
        Command::Browse(args) => browse::run(args),
        Command::Status { format } => commands::status(format),
        Command::Daemon { action, foreground } => match action {
            Some(DaemonAction::Stop) => commands::daemon_stop(),
            None => commands::daemon(foreground),
        },
        Command::TmuxInit { socket } => tmux_ui::tmux_init(socket),
        Command::Pick { socket, client } => tmux_ui::pick(socket, client),
        Command::Next { socket, client } => tmux_ui::next(socket, client),
        Command::LaunchLine {
            socket,
            pane,
            client,
        } => tmux_ui::launch_line(&socket, &pane, client),
        Command::PaneExec { env_file, command } => pane_exec::run(&env_file, &command),
        Command::Completions { shell } => manual::completions(Cli::command(), shell),
        Command::Man { command } => manual::man(Cli::command(), command.as_deref()),
    };
    if let Err(e) = result {
        e.print();
        std::process::exit(e.exit as i32);
    }
}
