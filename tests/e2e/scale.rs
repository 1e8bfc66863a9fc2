//! A long session at scale: 100,000 jobs for one owner, through the registry and
//! the component. (Timing is measured in `benches/`; this checks what must hold
//! at that size: bounded retention, a bounded list, ids that keep their meaning.)

use crate::fixture::{Fixture, ScriptedJob};
use host::OutcomeStatus;
use serde_json::json;

const JOBS: usize = 100_000;

// One thread: the scripted producers settle by yielding to it. Profile C pulls
// its notices, so no guest call per settlement (profile A's bounded list is
// tested at 10,000 jobs in `containment`).
#[tokio::test]
async fn a_hundred_thousand_jobs_keep_retention_and_the_list_bounded() {
    let f = Fixture::with_config(r#"{"profile":"c"}"#, host::RegistryConfig::default()).await;
    let alice = f.alice.clone();
    for _ in 0..JOBS {
        let (id, control) = f.start(ScriptedJob::final_output(Some(&alice))).unwrap();
        control
            .settle(OutcomeStatus::Completed, None, Some("done"))
            .await;
        // Seen, as a model's read would see it: now it may be dropped in turn.
        f.registry.read(&id, Some(&alice)).unwrap();
    }
    let kept = f.registry.list(Some(&alice)).len();
    assert_eq!(kept, 1000, "the documented per-owner retention");

    let list = f.call(Some(&alice), "job_list", json!({})).await;
    assert!(!list.is_error, "{}", list.text);
    let rows: Vec<&str> = list.text.lines().collect();
    assert_eq!(rows.len(), 201);
    let row = |n: usize, start: &str| assert!(rows[n].starts_with(start), "{}", rows[n]);
    row(0, "subagent-100000\tsucceeded\tsubagent\t");
    row(199, "subagent-99801\t");
    assert_eq!(rows[200], "800 older jobs not shown.");

    // A dropped id answers as unknown; the newest still reads.
    let gone = f
        .call(Some(&alice), "job_status", json!({"id": "subagent-1"}))
        .await;
    assert_eq!(gone.text, "error: agentcore: job not found");
    let newest = f
        .call(Some(&alice), "job_status", json!({"id": "subagent-100000"}))
        .await;
    assert!(newest.text.ends_with("\ndone"), "{}", newest.text);
    // Ids keep counting: the next job is the 100,001st.
    let (next, _control) = f.start(ScriptedJob::final_output(Some(&alice))).unwrap();
    assert_eq!(next, "subagent-100001");
}
