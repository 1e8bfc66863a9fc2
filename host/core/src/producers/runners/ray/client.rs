//! The Ray dashboard's job API, as much of it as a runner needs: the
//! version, a job's details, a submit, a stop and the whole log. The log's
//! live tail is [`super::tail`].
//!
//! Every request carries a plain `User-Agent` and, when there is one, the
//! token as `Authorization: Bearer` (the dashboard refuses what looks like
//! a browser). Every error names the address, and an auth error where the
//! token was looked for, never the token.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::producers::runners::{RAY_TOKEN_PLACES, Token};

/// How long a connection may take to open: a head on its own network
/// answers in milliseconds, one that is down refuses at once.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one request may take in all (a submit sets up nothing
/// synchronously; a whole log is at most what the engine reads at once).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call to the engine failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EngineError {
    /// No connection, or no answer in time.
    #[error("cannot reach the Ray engine at {address}: {why}")]
    Unreachable {
        /// The engine's address.
        address: String,
        /// What the connection said.
        why: String,
    },
    /// The engine refused our token, or asked for one.
    #[error(
        "the Ray engine at {address} refused the request (HTTP {status}): {found}; a token is looked for in {RAY_TOKEN_PLACES}"
    )]
    Auth {
        /// The engine's address.
        address: String,
        /// 401 or 403.
        status: u16,
        /// Which token was sent, by where it came from.
        found: String,
    },
    /// The engine has no job of that id.
    #[error("the Ray engine at {address} has no record of {id}")]
    NotFound {
        /// The engine's address.
        address: String,
        /// The submission id asked for.
        id: String,
    },
    /// Any other refusal, with the engine's own last words.
    #[error("the Ray engine at {address} answered HTTP {status}: {message}")]
    Refused {
        /// The engine's address.
        address: String,
        /// Its status code.
        status: u16,
        /// The last line of its answer (a Python traceback's is the error).
        message: String,
    },
    /// An answer that is not what the API promises.
    #[error("the Ray engine at {address} answered what this runner cannot read: {why}")]
    Garbled {
        /// The engine's address.
        address: String,
        /// What was wrong with it.
        why: String,
    },
}

impl EngineError {
    /// Whether trying again later may help: the engine was away or busy,
    /// not refusing this request for what it is.
    pub fn is_transient(&self) -> bool {
        match self {
            EngineError::Unreachable { .. } => true,
            // A head still starting answers 500 "No available agent"; a
            // proxy in front of a restarting head, 502 to 504.
            EngineError::Refused { status, .. } => *status >= 500,
            _ => false,
        }
    }
}

/// The engine's version (`GET /api/version`).
#[derive(Debug, Clone, Deserialize)]
pub struct Version {
    /// Ray's release, `2.60.0`.
    pub ray_version: String,
}

impl Version {
    /// The release as (major, minor); `None` for one that is not
    /// `MAJOR.MINOR...`.
    pub fn release(&self) -> Option<(u32, u32)> {
        let mut parts = self.ray_version.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some((major, minor))
    }

    /// Whether the engine takes `entrypoint_memory` and reports
    /// `driver_exit_code` (both since Ray 2.8). An unreadable version is
    /// taken as new: the engine's own 400 then says what it lacks.
    pub fn has_exit_codes(&self) -> bool {
        self.release().is_none_or(|release| release >= (2, 8))
    }
}

/// A job's details as the engine reports them (`JobDetails`), the fields a
/// runner reads.
#[derive(Debug, Clone, Deserialize)]
pub struct Details {
    /// `PENDING`, `RUNNING`, `STOPPED`, `SUCCEEDED` or `FAILED`.
    pub status: String,
    /// The engine's words on the status.
    #[serde(default)]
    pub message: Option<String>,
    /// Why it failed, by kind (`JOB_ENTRYPOINT_COMMAND_ERROR`, ...).
    #[serde(default)]
    pub error_type: Option<String>,
    /// The entrypoint's exit code, when it exited by itself (Ray 2.8+).
    #[serde(default)]
    pub driver_exit_code: Option<i64>,
}

impl Details {
    /// Whether the status is one the engine never changes again.
    pub fn is_terminal(&self) -> bool {
        matches!(self.status.as_str(), "STOPPED" | "SUCCEEDED" | "FAILED")
    }
}

/// What a submit sends (`JobSubmitRequest`): only set fields, since the
/// engine refuses a field it does not know.
#[derive(Debug, Clone, Default)]
pub struct Submit {
    /// The shell line the engine runs.
    pub entrypoint: String,
    /// Our id for the job, which makes a retried submit harmless.
    pub submission_id: String,
    /// `runtime_env.env_vars`.
    pub env_vars: Vec<(String, String)>,
    /// `metadata` (strings only).
    pub metadata: Vec<(String, String)>,
    /// `entrypoint_num_cpus`.
    pub cpus: Option<f64>,
    /// `entrypoint_num_gpus`.
    pub gpus: Option<f64>,
    /// `entrypoint_memory`, in bytes.
    pub memory_bytes: Option<u64>,
    /// `entrypoint_resources`.
    pub custom: Vec<(String, f64)>,
}

impl Submit {
    /// The request's body.
    pub fn body(&self) -> Value {
        let strings = |pairs: &[(String, String)]| {
            Value::Object(
                pairs
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect(),
            )
        };
        let mut body = Map::new();
        body.insert("entrypoint".into(), self.entrypoint.clone().into());
        body.insert("submission_id".into(), self.submission_id.clone().into());
        if !self.env_vars.is_empty() {
            let mut env = Map::new();
            env.insert("env_vars".into(), strings(&self.env_vars));
            body.insert("runtime_env".into(), Value::Object(env));
        }
        if !self.metadata.is_empty() {
            body.insert("metadata".into(), strings(&self.metadata));
        }
        if let Some(cpus) = self.cpus {
            body.insert("entrypoint_num_cpus".into(), cpus.into());
        }
        if let Some(gpus) = self.gpus {
            body.insert("entrypoint_num_gpus".into(), gpus.into());
        }
        if let Some(memory) = self.memory_bytes {
            body.insert("entrypoint_memory".into(), memory.into());
        }
        if !self.custom.is_empty() {
            let custom = self
                .custom
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(*v)))
                .collect();
            body.insert("entrypoint_resources".into(), Value::Object(custom));
        }
        Value::Object(body)
    }
}

/// What a submit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    /// The engine took it now.
    New,
    /// The engine already had a job of this id: an earlier try of the same
    /// submit that reached it, though its answer did not reach us.
    Already,
}

/// A client of one Ray head's job API.
#[derive(Clone)]
pub struct RayClient {
    http: reqwest::Client,
    address: String,
    token: Option<Token>,
}

impl std::fmt::Debug for RayClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RayClient")
            .field("address", &self.address)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl RayClient {
    /// A client of the head at `address` (`http://HOST:PORT`), sending
    /// `token` when there is one.
    ///
    /// # Errors
    ///
    /// An HTTP client this system cannot make.
    pub fn new(address: &str, token: Option<Token>) -> Result<RayClient, String> {
        let http = reqwest::Client::builder()
            .user_agent(user_agent())
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            // The tail's WebSocket goes straight to the head; so does every
            // request, so both reach the same place.
            .no_proxy()
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(RayClient {
            http,
            address: address.trim_end_matches('/').to_owned(),
            token,
        })
    }

    /// The head's address.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The token sent, if any.
    pub fn token(&self) -> Option<&Token> {
        self.token.as_ref()
    }

    /// The engine's version.
    ///
    /// # Errors
    ///
    /// See [`EngineError`].
    pub async fn version(&self) -> Result<Version, EngineError> {
        let answer = self
            .send(self.http.get(self.url("/api/version")), None)
            .await?;
        self.json(answer).await
    }

    /// Whether the engine takes our token: a lookup of a job that cannot
    /// exist answers 404 to a client it accepts (the version endpoint asks
    /// for no token).
    ///
    /// # Errors
    ///
    /// [`EngineError::Auth`] when it does not; see [`EngineError`].
    pub async fn check_auth(&self) -> Result<(), EngineError> {
        match self.details("jobshost-auth-probe").await {
            Ok(_) | Err(EngineError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// A job's details.
    ///
    /// # Errors
    ///
    /// [`EngineError::NotFound`] for a job the engine does not know; see
    /// [`EngineError`].
    pub async fn details(&self, id: &str) -> Result<Details, EngineError> {
        let answer = self
            .send(
                self.http.get(self.url(&format!("/api/jobs/{id}"))),
                Some(id),
            )
            .await?;
        self.json(answer).await
    }

    /// Submits `job`. A submit the engine already has (its id is taken) is
    /// [`Submitted::Already`] when the job of that id is there.
    ///
    /// # Errors
    ///
    /// See [`EngineError`].
    pub async fn submit(&self, job: &Submit) -> Result<Submitted, EngineError> {
        let request = self.http.post(self.url("/api/jobs/")).json(&job.body());
        match self.send(request, None).await {
            Ok(_) => Ok(Submitted::New),
            // The engine says so in a traceback, 400 or 500 by version.
            Err(EngineError::Refused { message, .. }) if message.contains("already exists") => {
                self.details(&job.submission_id).await?;
                Ok(Submitted::Already)
            }
            Err(e) => Err(e),
        }
    }

    /// Asks the engine to stop a job; answers whether it will (a job that
    /// has ended will not).
    ///
    /// # Errors
    ///
    /// See [`EngineError`].
    pub async fn stop(&self, id: &str) -> Result<bool, EngineError> {
        #[derive(Deserialize)]
        struct Stopped {
            stopped: bool,
        }
        let request = self.http.post(self.url(&format!("/api/jobs/{id}/stop")));
        let answer = self.send(request, Some(id)).await?;
        let stopped: Stopped = self.json(answer).await?;
        Ok(stopped.stopped)
    }

    /// A job's whole log as the engine keeps it now.
    ///
    /// # Errors
    ///
    /// See [`EngineError`].
    pub async fn logs(&self, id: &str) -> Result<String, EngineError> {
        #[derive(Deserialize)]
        struct Logs {
            logs: String,
        }
        let request = self.http.get(self.url(&format!("/api/jobs/{id}/logs")));
        let answer = self.send(request, Some(id)).await?;
        let logs: Logs = self.json(answer).await?;
        Ok(logs.logs)
    }

    /// The tail's WebSocket address for a job, and the headers it takes.
    pub(super) fn tail_request(
        &self,
        id: &str,
    ) -> Result<tokio_tungstenite::tungstenite::handshake::client::Request, EngineError> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        use tokio_tungstenite::tungstenite::http::HeaderValue;
        let url = format!(
            "ws://{}/api/jobs/{id}/logs/tail",
            self.address.trim_start_matches("http://")
        );
        let garbled = |why: String| EngineError::Garbled {
            address: self.address.clone(),
            why,
        };
        let mut request = url
            .into_client_request()
            .map_err(|e| garbled(format!("the tail's address: {e}")))?;
        let headers = request.headers_mut();
        headers.insert(
            "User-Agent",
            HeaderValue::from_str(&user_agent()).map_err(|e| garbled(e.to_string()))?,
        );
        if let Some(token) = &self.token {
            let value = HeaderValue::from_str(&format!("Bearer {}", token.value))
                .map_err(|_| garbled("the token is not a header value".to_owned()))?;
            headers.insert("Authorization", value);
        }
        Ok(request)
    }

    /// The error of a tail that could not open, in the client's words.
    pub(super) fn tail_error(&self, e: &tokio_tungstenite::tungstenite::Error) -> EngineError {
        use tokio_tungstenite::tungstenite::Error;
        match e {
            Error::Http(answer) => {
                let status = answer.status().as_u16();
                self.status_error(status, String::new(), None)
            }
            other => EngineError::Unreachable {
                address: self.address.clone(),
                why: other.to_string(),
            },
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.address)
    }

    async fn send(
        &self,
        mut request: reqwest::RequestBuilder,
        id: Option<&str>,
    ) -> Result<reqwest::Response, EngineError> {
        if let Some(token) = &self.token {
            request = request.bearer_auth(&token.value);
        }
        let answer = request.send().await.map_err(|e| EngineError::Unreachable {
            address: self.address.clone(),
            why: reqwest_why(&e),
        })?;
        let status = answer.status().as_u16();
        if answer.status().is_success() {
            return Ok(answer);
        }
        let text = answer.text().await.unwrap_or_default();
        Err(self.status_error(status, text, id))
    }

    fn status_error(&self, status: u16, text: String, id: Option<&str>) -> EngineError {
        let address = self.address.clone();
        match (status, id) {
            (401 | 403, _) => EngineError::Auth {
                address,
                status,
                found: match &self.token {
                    Some(token) => format!("the token from {} was sent", token.source),
                    None => "no token was found to send".to_owned(),
                },
            },
            (404, Some(id)) => EngineError::NotFound {
                address,
                id: id.to_owned(),
            },
            _ => EngineError::Refused {
                address,
                status,
                message: last_words(&text),
            },
        }
    }

    async fn json<T: serde::de::DeserializeOwned>(
        &self,
        answer: reqwest::Response,
    ) -> Result<T, EngineError> {
        let garbled = |why: String| EngineError::Garbled {
            address: self.address.clone(),
            why,
        };
        let bytes = answer.bytes().await.map_err(|e| garbled(reqwest_why(&e)))?;
        serde_json::from_slice(&bytes).map_err(|e| garbled(e.to_string()))
    }
}

/// What every request says it is.
pub fn user_agent() -> String {
    format!("jobs-host/{}", env!("CARGO_PKG_VERSION"))
}

/// The last non-blank line of an error answer, at most 300 bytes: a
/// traceback's last line is its error.
fn last_words(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && *l != ".")
        .unwrap_or("(no message)");
    let mut end = line.len().min(300);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_owned()
}

/// A request's failure with its causes, which say what actually happened
/// (`connection refused`), not only that the request failed.
fn reqwest_why(e: &reqwest::Error) -> String {
    let mut why = if e.is_timeout() {
        "no answer in time".to_owned()
    } else if e.is_connect() {
        "cannot connect".to_owned()
    } else {
        "the request failed".to_owned()
    };
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !why.contains(&text) {
            why.push_str(": ");
            why.push_str(&text);
        }
        source = cause.source();
    }
    why
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_submit_sends_only_what_is_set() {
        let plain = Submit {
            entrypoint: "true".into(),
            submission_id: "s-1".into(),
            ..Submit::default()
        };
        assert_eq!(
            plain.body(),
            serde_json::json!({"entrypoint": "true", "submission_id": "s-1"})
        );
        let full = Submit {
            env_vars: vec![("A".into(), "1".into())],
            metadata: vec![("m".into(), "x".into())],
            cpus: Some(0.5),
            gpus: Some(1.0),
            memory_bytes: Some(1024),
            custom: vec![("tpu".into(), 2.0)],
            ..plain
        };
        assert_eq!(
            full.body(),
            serde_json::json!({
                "entrypoint": "true", "submission_id": "s-1",
                "runtime_env": {"env_vars": {"A": "1"}}, "metadata": {"m": "x"},
                "entrypoint_num_cpus": 0.5, "entrypoint_num_gpus": 1.0,
                "entrypoint_memory": 1024, "entrypoint_resources": {"tpu": 2.0}
            })
        );
    }

    #[test]
    fn an_error_answer_says_its_last_line() {
        let traceback = "Traceback (most recent call last):\n  File \"x\"\nValueError: Job with submission_id s-1 already exists.\n.\n";
        assert_eq!(
            last_words(traceback),
            "ValueError: Job with submission_id s-1 already exists."
        );
        assert_eq!(last_words(""), "(no message)");
        assert_eq!(last_words(&"é".repeat(400)).len(), 300);
    }

    #[test]
    fn versions_before_exit_codes_are_told_apart() {
        let v = |s: &str| Version {
            ray_version: s.into(),
        };
        assert!(v("2.60.0").has_exit_codes());
        assert!(v("2.8.0").has_exit_codes());
        assert!(!v("2.7.1").has_exit_codes());
        assert!(v("nightly").has_exit_codes());
    }

    #[test]
    fn an_auth_error_names_the_places_never_the_token() {
        let client = RayClient::new(
            "http://h:1",
            Some(Token {
                value: "s3cret".into(),
                source: "RAY_AUTH_TOKEN".into(),
            }),
        )
        .unwrap();
        let e = client.status_error(401, String::new(), None).to_string();
        assert!(e.contains("RAY_AUTH_TOKEN_PATH"), "{e}");
        assert!(e.contains("the token from RAY_AUTH_TOKEN was sent"), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
    }
}
