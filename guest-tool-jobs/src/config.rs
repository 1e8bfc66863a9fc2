//! The guest's configuration: defaults and the checks made at load.
//!
//! (Over 500 lines with its tests, some 160: three profiles' keys and the
//! extensions', with every refusal's exact text.)

use serde_json::{Map, Value};

use crate::model::{Sandbox, SandboxFiles, SandboxNetwork, js_number};
use crate::wording;

/// Which tool surface the plugin presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// `job_output`, `job_list`, `job_kill`; notices may wake an idle owner.
    #[default]
    A,
    /// `task_output`, `task_list`, `task_kill`; notices are only ever injected.
    B,
    /// `job_list`, `job_status`, `job_wait`, `job_cancel`; notices are pulled
    /// before each step as one batch (the Go-style surface).
    C,
}

impl Profile {
    /// The plugin name on notices and at the start of config errors.
    pub fn plugin(self) -> &'static str {
        match self {
            Profile::A => wording::A.plugin,
            Profile::B => wording::B.plugin,
            Profile::C => wording::go::PLUGIN,
        }
    }
}

/// Lane policy for completion notices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionDelivery {
    /// Wake an idle owner, within the wake budget.
    Wakeup,
    /// Only ever inject.
    Quiet,
}

/// Validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The tool surface.
    pub profile: Profile,
    /// Wait used when `wait: true` comes without `timeout_ms`, in whole
    /// milliseconds (a fractional config value is rounded up).
    pub wait_timeout_ms: u64,
    /// Hard cap on any wait, in whole milliseconds (rounded up likewise).
    pub max_wait_timeout_ms: u64,
    /// Notice lane policy.
    pub completion_delivery: CompletionDelivery,
    /// Wake-ups one owner may receive before notices fall back to injection.
    pub max_consecutive_wakes: u64,
    /// Profile C: the most bytes of a job's result or error the model sees.
    pub max_result_bytes: u64,
    /// Profile C: no batched completion notices.
    pub suppress_completion_notice: bool,
    /// The enabled extensions (none by default).
    pub extensions: Extensions,
    /// Per-job limits' maxima (extension `limits`).
    pub limits: JobLimits,
    /// The session's sandbox (extension `sandbox`); `None`: full authority.
    pub sandbox: Option<Sandbox>,
    /// Render pipe jobs' output too (extension `terminal`).
    pub render_output: bool,
    /// The runners a job may name besides this host (extension `runners`).
    pub runners: Vec<String>,
}

/// The opt-in extensions a mount enables (see the WIT `extension`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extensions {
    /// Waits that end on a ready line or on quiet output.
    pub ready: bool,
    /// Input and signals.
    pub input: bool,
    /// Paging and searching retained output.
    pub log: bool,
    /// Per-job limits.
    pub limits: bool,
    /// Listening ports and named jobs.
    pub ports: bool,
    /// Starts that wait a little for the command to end.
    pub yields: bool,
    /// Narrower sandboxes on start, and each job's in its status.
    pub sandbox: bool,
    /// Jobs on a terminal: rendered output, keys, resizes, the screen and
    /// waits that end at a prompt.
    pub terminal: bool,
    /// Jobs on a cluster engine: `runner` and `resources` on a start.
    pub runners: bool,
}

impl Extensions {
    /// The names, in the order the config and the WIT list them.
    pub const NAMES: [&'static str; 9] = [
        "ready", "input", "log", "limits", "ports", "yield", "sandbox", "terminal", "runners",
    ];

    /// Every extension.
    pub const ALL: Extensions = Extensions {
        ready: true,
        input: true,
        log: true,
        limits: true,
        ports: true,
        yields: true,
        sandbox: true,
        terminal: true,
        runners: true,
    };

    /// Whether the extension called `name` is enabled.
    pub fn has(&self, name: &str) -> bool {
        match name {
            "ready" => self.ready,
            "input" => self.input,
            "log" => self.log,
            "limits" => self.limits,
            "ports" => self.ports,
            "yield" => self.yields,
            "sandbox" => self.sandbox,
            "terminal" => self.terminal,
            "runners" => self.runners,
            _ => false,
        }
    }

    fn set(&mut self, name: &str) -> bool {
        let slot = match name {
            "ready" => &mut self.ready,
            "input" => &mut self.input,
            "log" => &mut self.log,
            "limits" => &mut self.limits,
            "ports" => &mut self.ports,
            "yield" => &mut self.yields,
            "sandbox" => &mut self.sandbox,
            "terminal" => &mut self.terminal,
            "runners" => &mut self.runners,
            _ => return false,
        };
        *slot = true;
        true
    }
}

/// The maxima of per-job limits; `None` is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct JobLimits {
    /// Wall-clock milliseconds.
    pub timeout_ms: Option<u64>,
    /// CPU seconds per process.
    pub cpu_seconds: Option<u64>,
    /// Address-space bytes per process.
    pub memory_bytes: Option<u64>,
    /// Output bytes, both streams together.
    pub output_bytes: Option<u64>,
}

/// The config keys of the extensions, accepted under every profile. They are
/// left out of the `known:` list of the unknown-key error, which stays as the
/// seed surfaces word it.
const EXTENSION_KEYS: &[&str] = &["extensions", "limits", "sandbox", "renderOutput", "runners"];

/// The longest runner name, in bytes.
pub const MAX_RUNNER_NAME_BYTES: usize = 64;

/// The mount's runners from the config's `"runners"`: a list of distinct
/// names of letters, digits, `-` and `_`.
fn parse_runners(value: &Value) -> Result<Vec<String>, String> {
    let wrong = || format!("runners must be a list of names, got {value}");
    let names = value.as_array().ok_or_else(wrong)?;
    let mut runners: Vec<String> = Vec::with_capacity(names.len());
    for name in names {
        let name = name.as_str().ok_or_else(wrong)?;
        let fits = !name.is_empty()
            && name.len() <= MAX_RUNNER_NAME_BYTES
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !fits {
            return Err(format!(
                "runner name {name:?} must be 1 to {MAX_RUNNER_NAME_BYTES} letters, digits, - or _"
            ));
        }
        if runners.iter().any(|r| r == name) {
            return Err(format!("runners names \"{name}\" twice"));
        }
        runners.push(name.to_owned());
    }
    Ok(runners)
}
const SANDBOX_KEYS: [&str; 2] = ["files", "network"];

/// The session's sandbox from the config's `"sandbox"`: `files` (default
/// `full`) and `network` (default `on`).
fn parse_sandbox(value: &Value) -> Result<Sandbox, String> {
    let Value::Object(map) = value else {
        return Err(format!(
            "sandbox must be an object with files and network, got {value}"
        ));
    };
    if let Some(unknown) = map.keys().find(|k| !SANDBOX_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "unknown sandbox key \"{unknown}\" (known: {})",
            SANDBOX_KEYS.join(", ")
        ));
    }
    let files = match map.get("files") {
        None => SandboxFiles::Full,
        Some(v) => v.as_str().and_then(SandboxFiles::parse).ok_or_else(|| {
            format!("sandbox.files must be \"full\", \"workspace-write\" or \"read-only\", got {v}")
        })?,
    };
    let network = match map.get("network") {
        None => SandboxNetwork::On,
        Some(v) => SandboxNetwork::from_json(v).ok_or_else(|| {
            format!("sandbox.network must be \"on\", \"off\" or a list of ports from 1 to 65535, got {v}")
        })?,
    };
    Ok(Sandbox { files, network })
}
const LIMIT_KEYS: [&str; 4] = ["timeoutMs", "cpuSeconds", "memoryBytes", "outputBytes"];

fn parse_extensions(value: &Value) -> Result<Extensions, String> {
    let wrong = || {
        format!(
            "extensions must be true, false or a list of names ({}), got {value}",
            Extensions::NAMES.join(", ")
        )
    };
    match value {
        Value::Bool(true) => Ok(Extensions::ALL),
        Value::Bool(false) => Ok(Extensions::default()),
        Value::Array(names) => {
            let mut set = Extensions::default();
            for name in names {
                let Some(text) = name.as_str() else {
                    return Err(wrong());
                };
                if set.has(text) {
                    return Err(format!("extensions names \"{text}\" twice"));
                }
                if !set.set(text) {
                    return Err(format!(
                        "unknown extension \"{text}\" (known: {})",
                        Extensions::NAMES.join(", ")
                    ));
                }
            }
            Ok(set)
        }
        _ => Err(wrong()),
    }
}

fn parse_limits(value: &Value) -> Result<JobLimits, String> {
    let Value::Object(map) = value else {
        return Err(format!("limits must be an object, got {value}"));
    };
    if let Some(unknown) = map.keys().find(|k| !LIMIT_KEYS.contains(&k.as_str())) {
        return Err(format!(
            "unknown limit \"{unknown}\" (known: {})",
            LIMIT_KEYS.join(", ")
        ));
    }
    let limit = |key: &str| -> Result<Option<u64>, String> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v
                .as_u64()
                .filter(|n| *n >= 1 && *n as f64 <= MAX_SAFE_INTEGER)
            {
                Some(n) => Ok(Some(n)),
                None => Err(format!(
                    "limits.{key} must be a whole number of at least 1, got {v}"
                )),
            },
        }
    };
    let limits = JobLimits {
        timeout_ms: limit("timeoutMs")?,
        cpu_seconds: limit("cpuSeconds")?,
        memory_bytes: limit("memoryBytes")?,
        output_bytes: limit("outputBytes")?,
    };
    let max_timer = crate::model::MAX_TIMER_MS;
    if limits
        .timeout_ms
        .is_some_and(|ms| ms > u64::from(max_timer))
    {
        return Err(format!(
            "limits.timeoutMs must be at most {max_timer} (the longest a timer holds)"
        ));
    }
    Ok(limits)
}

impl Default for Config {
    fn default() -> Self {
        Config {
            profile: Profile::A,
            wait_timeout_ms: 30_000,
            max_wait_timeout_ms: 600_000,
            completion_delivery: CompletionDelivery::Wakeup,
            max_consecutive_wakes: 3,
            max_result_bytes: DEFAULT_MAX_RESULT_BYTES,
            suppress_completion_notice: false,
            extensions: Extensions::default(),
            limits: JobLimits::default(),
            sandbox: None,
            render_output: false,
            runners: Vec::new(),
        }
    }
}

/// Profile C's result bound when `maxResultBytes` is 0 or absent: 24 KiB.
pub const DEFAULT_MAX_RESULT_BYTES: u64 = 24 * 1024;
/// Profile C's wait cap when `maxWaitSeconds` is 0 or absent.
pub const DEFAULT_MAX_WAIT_SECONDS: u64 = 120;
/// The longest wait a timer can hold, in whole seconds (2147483647 ms).
const MAX_WAIT_SECONDS: u64 = 2_147_483;

/// The largest integer a JavaScript number holds exactly.
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

const KEYS_A: &[&str] = &[
    "profile",
    "waitTimeoutMs",
    "maxWaitTimeoutMs",
    "completionDelivery",
    "maxConsecutiveWakes",
];
/// Profile B has no delivery setting and no wake budget.
const KEYS_B: &[&str] = &["profile", "waitTimeoutMs", "maxWaitTimeoutMs"];
/// Profile C's settings are those of its Go plugin, in camelCase.
const KEYS_C: &[&str] = &[
    "profile",
    "maxResultBytes",
    "maxWaitSeconds",
    "suppressCompletionNotice",
];

/// Parses and checks configuration JSON. `null` and `{}` give the defaults;
/// `"profile"` (`"a"`, `"b"` or `"c"`) picks the tool surface.
///
/// # Errors
///
/// An operator-facing message starting with the profile's plugin name
/// (`tool-jobs: `, `tool-tasks: ` or `jobs: `).
pub fn parse_config(json: &str) -> Result<Config, String> {
    let value: Value = match serde_json::from_str(json) {
        Ok(value) => value,
        Err(e) => return Err(unparsable(json, &e)),
    };
    let map = match value {
        Value::Null => Map::new(),
        Value::Object(map) => map,
        other => {
            return Err(format!(
                "tool-jobs: config must be a JSON object, got {other}"
            ));
        }
    };
    let profile = match map.get("profile") {
        None => Profile::A,
        Some(v) => match v.as_str() {
            Some("a") => Profile::A,
            Some("b") => Profile::B,
            Some("c") => Profile::C,
            _ => {
                return Err(format!(
                    "tool-jobs: profile must be \"a\", \"b\" or \"c\", got {v}"
                ));
            }
        },
    };
    let plugin = profile.plugin();
    parse_for(profile, &map).map_err(|message| format!("{plugin}: {message}"))
}

/// The error for config text that does not parse. A number beyond what a
/// double holds (`1e400`, the JSON nearest to JavaScript's `Infinity`) is
/// named by its key, in the profile's words, as the key's own check would
/// word an infinite value; anything else is not valid JSON.
fn unparsable(json: &str, error: &serde_json::Error) -> String {
    let invalid = format!("tool-jobs: config is not valid JSON ({error})");
    let Some(number) = infinite_number(json) else {
        return invalid;
    };
    // With the number replaced, the rest may parse: then the profile (and so
    // the plugin's name) is known.
    let patched = format!("{}0{}", &json[..number.start], &json[number.end..]);
    let plugin = match serde_json::from_str::<Value>(&patched) {
        Ok(value) => match value.get("profile").and_then(Value::as_str) {
            Some("b") => Profile::B.plugin(),
            Some("c") => Profile::C.plugin(),
            _ => Profile::A.plugin(),
        },
        Err(_) => return invalid,
    };
    let shown = if number.negative {
        "-Infinity"
    } else {
        "Infinity"
    };
    let key = number.key.as_deref().unwrap_or("a config value");
    match (key, number.negative) {
        // The contract's words for a wake limit that bounds nothing.
        ("maxConsecutiveWakes", false) => {
            format!("{plugin}: maxConsecutiveWakes ({shown}) must be a whole number of turns")
        }
        _ => format!("{plugin}: {key} ({shown}) is not a finite number"),
    }
}

/// A number literal that overflows a double, with the key it is the value of
/// (the nearest key before it; for a number in a list, the list's key).
struct InfiniteNumber {
    start: usize,
    end: usize,
    negative: bool,
    key: Option<String>,
}

/// Finds the first number literal in `json` that parses to an infinite
/// double, skipping strings.
fn infinite_number(json: &str) -> Option<InfiniteNumber> {
    let bytes = json.as_bytes();
    let mut key: Option<String> = None;
    let mut last_string: Option<String> = None;
    // The key each open container was the value of, so a number after a
    // nested object in a list is named by the list's key again.
    let mut outer: Vec<Option<String>> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' => {
                outer.push(key.clone());
                i += 1;
            }
            b'}' | b']' => {
                key = outer.pop().flatten();
                i += 1;
            }
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                let end = i.min(bytes.len());
                last_string = serde_json::from_str(&format!("\"{}\"", &json[start..end])).ok();
                i += 1;
            }
            b':' => {
                key = last_string.take();
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                i += 1;
                while i < bytes.len()
                    && matches!(bytes[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                {
                    i += 1;
                }
                let literal = &json[start..i];
                if literal.parse::<f64>().is_ok_and(f64::is_infinite) {
                    return Some(InfiniteNumber {
                        start,
                        end: i,
                        negative: literal.starts_with('-'),
                        key: key.clone(),
                    });
                }
            }
            _ => i += 1,
        }
    }
    None
}

fn parse_for(profile: Profile, map: &Map<String, Value>) -> Result<Config, String> {
    let keys = match profile {
        Profile::A => KEYS_A,
        Profile::B => KEYS_B,
        Profile::C => KEYS_C,
    };
    if let Some(unknown) = map
        .keys()
        .find(|k| !keys.contains(&k.as_str()) && !EXTENSION_KEYS.contains(&k.as_str()))
    {
        return Err(format!(
            "unknown config key \"{unknown}\" (known: {})",
            keys.join(", ")
        ));
    }
    let mut config = Config {
        profile,
        ..Config::default()
    };
    if let Some(v) = map.get("extensions") {
        config.extensions = parse_extensions(v)?;
    }
    if let Some(v) = map.get("limits") {
        if !config.extensions.limits {
            return Err(
                "limits needs the \"limits\" extension (\"extensions\": [\"limits\"])".to_owned(),
            );
        }
        config.limits = parse_limits(v)?;
    }
    if let Some(v) = map.get("sandbox") {
        if !config.extensions.sandbox {
            return Err(
                "sandbox needs the \"sandbox\" extension (\"extensions\": [\"sandbox\"])"
                    .to_owned(),
            );
        }
        // Full authority is no sandbox.
        config.sandbox = Some(parse_sandbox(v)?).filter(|s| *s != Sandbox::FULL);
    }
    if let Some(v) = map.get("renderOutput") {
        if !config.extensions.terminal {
            return Err(
                "renderOutput needs the \"terminal\" extension (\"extensions\": [\"terminal\"])"
                    .to_owned(),
            );
        }
        config.render_output = v
            .as_bool()
            .ok_or_else(|| format!("renderOutput must be true or false, got {v}"))?;
    }
    if let Some(v) = map.get("runners") {
        if !config.extensions.runners {
            return Err(
                "runners needs the \"runners\" extension (\"extensions\": [\"runners\"])"
                    .to_owned(),
            );
        }
        config.runners = parse_runners(v)?;
    }
    // Compared as written (so the error quotes the operator's numbers), then
    // kept as whole milliseconds, the unit host and guest share.
    let wait = match map.get("waitTimeoutMs") {
        Some(v) => timeout_ms("waitTimeoutMs", v)?,
        None => config.wait_timeout_ms as f64,
    };
    let max_wait = match map.get("maxWaitTimeoutMs") {
        Some(v) => timeout_ms("maxWaitTimeoutMs", v)?,
        None => config.max_wait_timeout_ms as f64,
    };
    config.wait_timeout_ms = whole_ms(wait);
    config.max_wait_timeout_ms = whole_ms(max_wait);
    if let Some(v) = map.get("completionDelivery") {
        config.completion_delivery = match v.as_str() {
            Some("wakeup") => CompletionDelivery::Wakeup,
            Some("quiet") => CompletionDelivery::Quiet,
            _ => {
                return Err(format!(
                    "completionDelivery must be \"quiet\" or \"wakeup\", got {v}"
                ));
            }
        };
    }
    if let Some(v) = map.get("maxConsecutiveWakes") {
        let n = at_least_one("maxConsecutiveWakes", v)?;
        if n.fract() != 0.0 || n > MAX_SAFE_INTEGER {
            return Err(format!(
                "maxConsecutiveWakes ({}) must be a whole number of turns",
                js_number(n)
            ));
        }
        // Exact: n is a whole number no larger than 2^53 - 1.
        config.max_consecutive_wakes = n as u64;
    }
    match profile {
        Profile::C => return parse_c(config, map),
        Profile::A | Profile::B => {}
    }
    if wait > max_wait {
        return Err(format!(
            "waitTimeoutMs ({}) exceeds maxWaitTimeoutMs ({})",
            js_number(wait),
            js_number(max_wait)
        ));
    }
    Ok(config)
}

/// Profile C: 0 (or absent) means the default, as in its Go plugin. Waits are
/// whole seconds; the host's wait cap is set to the same bound, and C never wakes.
fn parse_c(mut config: Config, map: &Map<String, Value>) -> Result<Config, String> {
    if let Some(v) = map.get("maxResultBytes") {
        config.max_result_bytes = match whole_number("maxResultBytes", v)? {
            0 => DEFAULT_MAX_RESULT_BYTES,
            n => n,
        };
    }
    let seconds = match map.get("maxWaitSeconds") {
        None => DEFAULT_MAX_WAIT_SECONDS,
        Some(v) => match whole_number("maxWaitSeconds", v)? {
            0 => DEFAULT_MAX_WAIT_SECONDS,
            n if n > MAX_WAIT_SECONDS => {
                return Err(format!(
                    "maxWaitSeconds ({n}) exceeds the longest wait a timer holds ({MAX_WAIT_SECONDS})"
                ));
            }
            n => n,
        },
    };
    config.max_wait_timeout_ms = seconds * 1000;
    config.wait_timeout_ms = config.max_wait_timeout_ms;
    config.completion_delivery = CompletionDelivery::Quiet;
    if let Some(v) = map.get("suppressCompletionNotice") {
        config.suppress_completion_notice = v
            .as_bool()
            .ok_or_else(|| format!("suppressCompletionNotice must be true or false, got {v}"))?;
    }
    Ok(config)
}

fn whole_number(key: &str, value: &Value) -> Result<u64, String> {
    value
        .as_u64()
        .filter(|n| *n as f64 <= MAX_SAFE_INTEGER)
        .ok_or_else(|| format!("{key} must be a whole number of at least 0, got {value}"))
}

/// A timeout of at least 1 ms as whole milliseconds, rounded up (saturating for
/// values beyond `u64`).
fn whole_ms(ms: f64) -> u64 {
    ms.ceil() as u64
}

fn at_least_one(key: &str, value: &Value) -> Result<f64, String> {
    match value.as_f64() {
        Some(n) if n >= 1.0 => Ok(n),
        _ => Err(format!("{key} must be a number of at least 1, got {value}")),
    }
}

/// A timeout of at least 1 ms that host and guest can hold as whole
/// milliseconds: at most 2^53 - 1, so it is never clamped silently and a
/// model's larger `timeout_ms` is judged (and quoted) as it was sent.
fn timeout_ms(key: &str, value: &Value) -> Result<f64, String> {
    let n = at_least_one(key, value)?;
    if n > MAX_SAFE_INTEGER {
        return Err(format!(
            "{key} ({}) must be at most 9007199254740991",
            js_number(n)
        ));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_beyond_a_double_are_named_by_their_key() {
        assert_eq!(
            parse_config(r#"{"maxConsecutiveWakes": 1e400}"#).unwrap_err(),
            "tool-jobs: maxConsecutiveWakes (Infinity) must be a whole number of turns"
        );
        assert_eq!(
            parse_config(r#"{"profile": "b", "waitTimeoutMs": -1e999}"#).unwrap_err(),
            "tool-tasks: waitTimeoutMs (-Infinity) is not a finite number"
        );
        assert_eq!(
            parse_config(r#"{"profile":"c","extensions":["limits"],"limits":{"timeoutMs":2e308}}"#)
                .unwrap_err(),
            "jobs: timeoutMs (Infinity) is not a finite number"
        );
        assert_eq!(
            parse_config(r#"{"extensions":[{"a":1},1e400]}"#).unwrap_err(),
            "tool-jobs: extensions (Infinity) is not a finite number"
        );
        // Inside a string it is only text; elsewhere bad JSON stays bad JSON.
        assert!(
            parse_config(r#"{"profile": "1e400"}"#)
                .unwrap_err()
                .contains("profile must be")
        );
        assert!(
            parse_config(r#"{"maxConsecutiveWakes": 1e400"#)
                .unwrap_err()
                .starts_with("tool-jobs: config is not valid JSON")
        );
    }

    #[test]
    fn timeouts_that_do_not_fit_are_refused_with_their_key() {
        assert_eq!(
            parse_config(r#"{"maxWaitTimeoutMs": 1e22}"#).unwrap_err(),
            "tool-jobs: maxWaitTimeoutMs (1e+22) must be at most 9007199254740991"
        );
        assert_eq!(
            parse_config(r#"{"waitTimeoutMs": 9007199254740992}"#).unwrap_err(),
            "tool-jobs: waitTimeoutMs (9007199254740992) must be at most 9007199254740991"
        );
        let c = parse_config(r#"{"maxWaitTimeoutMs": 9007199254740991}"#).unwrap();
        assert_eq!(c.max_wait_timeout_ms, 9_007_199_254_740_991);
    }

    #[test]
    fn defaults_hold_for_an_empty_config() {
        assert_eq!(parse_config("{}").unwrap(), Config::default());
        assert_eq!(parse_config("null").unwrap(), Config::default());
    }

    #[test]
    fn default_wait_above_the_cap_is_rejected() {
        let err = parse_config(r#"{"waitTimeoutMs":100,"maxWaitTimeoutMs":50}"#).unwrap_err();
        assert_eq!(
            err,
            "tool-jobs: waitTimeoutMs (100) exceeds maxWaitTimeoutMs (50)"
        );
    }

    #[test]
    fn lanes_and_budgets_are_checked() {
        assert!(parse_config(r#"{"completionDelivery":"loud"}"#).is_err());
        assert!(parse_config(r#"{"maxConsecutiveWakes":0}"#).is_err());
        let err = parse_config(r#"{"maxConsecutiveWakes":2.5}"#).unwrap_err();
        assert_eq!(
            err,
            "tool-jobs: maxConsecutiveWakes (2.5) must be a whole number of turns"
        );
        assert!(
            parse_config(r#"{"maxConsecutiveWakes":1e300}"#)
                .unwrap_err()
                .contains("maxConsecutiveWakes")
        );
        assert_eq!(
            parse_config(r#"{"maxConsecutiveWakes":1}"#)
                .unwrap()
                .max_consecutive_wakes,
            1
        );
    }

    #[test]
    fn profile_b_has_its_own_keys_and_prefix() {
        let b = parse_config(r#"{"profile":"b","waitTimeoutMs":5}"#).unwrap();
        assert_eq!((b.profile, b.wait_timeout_ms), (Profile::B, 5));
        assert_eq!(
            parse_config(r#"{"profile":"b","waitTimeoutMs":100,"maxWaitTimeoutMs":50}"#)
                .unwrap_err(),
            "tool-tasks: waitTimeoutMs (100) exceeds maxWaitTimeoutMs (50)"
        );
        assert!(
            parse_config(r#"{"profile":"b","maxConsecutiveWakes":2}"#)
                .unwrap_err()
                .starts_with("tool-tasks: unknown config key \"maxConsecutiveWakes\"")
        );
        assert!(parse_config(r#"{"profile":"z"}"#).is_err());
    }

    #[test]
    fn fractional_timeouts_become_whole_milliseconds_rounded_up() {
        let c = parse_config(r#"{"waitTimeoutMs":1.2,"maxWaitTimeoutMs":1.5}"#).unwrap();
        assert_eq!((c.wait_timeout_ms, c.max_wait_timeout_ms), (2, 2));
        // Compared as written: 1.5 exceeds 1.2 although both round to 2.
        assert_eq!(
            parse_config(r#"{"waitTimeoutMs":1.5,"maxWaitTimeoutMs":1.2}"#).unwrap_err(),
            "tool-jobs: waitTimeoutMs (1.5) exceeds maxWaitTimeoutMs (1.2)"
        );
    }

    #[test]
    fn profile_c_takes_its_go_settings() {
        let c = parse_config(r#"{"profile":"c"}"#).unwrap();
        assert_eq!(c.profile, Profile::C);
        assert_eq!(c.max_result_bytes, 24 * 1024);
        assert_eq!(
            (c.wait_timeout_ms, c.max_wait_timeout_ms),
            (120_000, 120_000)
        );
        assert!(!c.suppress_completion_notice);
        let set = parse_config(
            r#"{"profile":"c","maxResultBytes":200,"maxWaitSeconds":5,"suppressCompletionNotice":true}"#,
        )
        .unwrap();
        assert_eq!(set.max_result_bytes, 200);
        assert_eq!(set.max_wait_timeout_ms, 5000);
        assert!(set.suppress_completion_notice);
        let zero =
            parse_config(r#"{"profile":"c","maxResultBytes":0,"maxWaitSeconds":0}"#).unwrap();
        assert_eq!(
            (zero.max_result_bytes, zero.max_wait_timeout_ms),
            (24 * 1024, 120_000)
        );
        assert_eq!(
            parse_config(r#"{"profile":"c","maxWaitSeconds":1.5}"#).unwrap_err(),
            "jobs: maxWaitSeconds must be a whole number of at least 0, got 1.5"
        );
        assert_eq!(
            parse_config(r#"{"profile":"c","maxWaitSeconds":2147484}"#).unwrap_err(),
            "jobs: maxWaitSeconds (2147484) exceeds the longest wait a timer holds (2147483)"
        );
        assert!(
            parse_config(r#"{"profile":"c","waitTimeoutMs":5}"#)
                .unwrap_err()
                .starts_with("jobs: unknown config key \"waitTimeoutMs\"")
        );
        assert!(parse_config(r#"{"profile":"c","suppressCompletionNotice":1}"#).is_err());
        assert!(parse_config(r#"{"profile":"c","maxResultBytes":-1}"#).is_err());
    }

    #[test]
    fn typos_are_caught() {
        let err = parse_config(r#"{"waitTimeout":5}"#).unwrap_err();
        assert!(err.contains("unknown config key \"waitTimeout\""), "{err}");
    }
}
