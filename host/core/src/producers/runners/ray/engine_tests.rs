//! The client against a real Ray head: `JOBS_HOST_RAY` names its dashboard
//! (`tests/runners/run` starts one and sets it). Without it each test says
//! so on stderr and checks nothing, so a plain `cargo test` needs no
//! cluster; the test command always sets it.

use std::time::Duration;

use super::client::{EngineError, RayClient, Submit, Submitted};
use crate::producers::runners::Token;

fn head() -> Option<String> {
    let address = std::env::var("JOBS_HOST_RAY")
        .ok()
        .filter(|a| !a.is_empty());
    if address.is_none() {
        eprintln!(
            "SKIPPED: JOBS_HOST_RAY is not set (tests/runners/run starts a Ray head and sets it)"
        );
    }
    address
}

fn client(address: &str) -> RayClient {
    let token = std::env::var("JOBS_HOST_RAY_TOKEN")
        .ok()
        .map(|value| Token {
            value,
            source: "JOBS_HOST_RAY_TOKEN".into(),
        });
    RayClient::new(address, token).unwrap()
}

fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("jobshost-test-{what}-{nanos}")
}

async fn ended(client: &RayClient, id: &str) -> super::client::Details {
    for _ in 0..600 {
        let details = client.details(id).await.unwrap();
        if details.is_terminal() {
            return details;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{id} did not end in 60 s");
}

#[tokio::test]
async fn a_submit_tried_again_runs_the_job_once() {
    let Some(address) = head() else { return };
    let client = client(&address);
    let id = unique("twice");
    let job = Submit {
        entrypoint: "echo once".into(),
        submission_id: id.clone(),
        ..Submit::default()
    };
    assert_eq!(client.submit(&job).await.unwrap(), Submitted::New);
    assert_eq!(client.submit(&job).await.unwrap(), Submitted::Already);
    let details = ended(&client, &id).await;
    assert_eq!(details.status, "SUCCEEDED");
    let log = client.logs(&id).await.unwrap();
    assert_eq!(log.lines().filter(|l| *l == "once").count(), 1, "{log}");
}

#[tokio::test]
async fn the_engine_says_what_it_lacks_in_words() {
    let Some(address) = head() else { return };
    let client = client(&address);
    let version = client.version().await.unwrap();
    assert!(version.has_exit_codes(), "{version:?}");
    client.check_auth().await.unwrap();
    match client.details("jobshost-test-no-such-job").await {
        Err(EngineError::NotFound { id, .. }) => assert_eq!(id, "jobshost-test-no-such-job"),
        other => panic!("{other:?}"),
    }
    // An exit code is the engine's own.
    let id = unique("seven");
    let job = Submit {
        entrypoint: "exit 7".into(),
        submission_id: id.clone(),
        ..Submit::default()
    };
    client.submit(&job).await.unwrap();
    let details = ended(&client, &id).await;
    assert_eq!(
        (details.status.as_str(), details.driver_exit_code),
        ("FAILED", Some(7))
    );
}

#[tokio::test]
async fn a_wrong_token_is_refused_by_where_it_came_from() {
    let Some(address) = head() else { return };
    if std::env::var("JOBS_HOST_RAY_TOKEN").is_err() {
        eprintln!("SKIPPED: the head at {address} takes no token (JOBS_HOST_RAY_TOKEN unset)");
        return;
    }
    let wrong = RayClient::new(
        &address,
        Some(Token {
            value: "not-the-token".into(),
            source: "RAY_AUTH_TOKEN".into(),
        }),
    )
    .unwrap();
    let error = wrong.check_auth().await.unwrap_err();
    let words = error.to_string();
    assert!(matches!(error, EngineError::Auth { .. }), "{words}");
    assert!(words.contains("RAY_AUTH_TOKEN"), "{words}");
    assert!(!words.contains("not-the-token"), "{words}");
    // No token at all is refused the same way.
    let none = RayClient::new(&address, None).unwrap();
    assert!(matches!(
        none.check_auth().await,
        Err(EngineError::Auth { .. })
    ));
}
