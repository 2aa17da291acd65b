use super::*;
use crate::a2a::params::SendRequest;

fn send(text: &str) -> SendRequest {
    SendRequest {
        message_id: "m".into(),
        text: text.into(),
        parts: Vec::new(),
        context_id: None,
        task_id: None,
        return_immediately: true,
        history_length: None,
        data: Vec::new(),
        push: None,
    }
}

fn submit(t: &Tasks, text: &str) -> Task {
    t.submit(&send(text), Origin::file(), Watch::None, 1)
}

fn take(t: &Tasks) -> Taken {
    match t.next(Some(Duration::ZERO), &AtomicI32::new(0), || 2) {
        Next::Task(k) => *k,
        other => panic!("no task: {other:?}"),
    }
}

fn done(text: &str) -> Outcome {
    Outcome {
        state: State::Completed,
        answer: Some(text.into()),
        message: None,
        files: Vec::new(),
        as_message: false,
    }
}

fn busy_text(task: &Task) -> &str {
    task.status_message.as_ref().map_or("", |m| m.text.as_str())
}

#[test]
fn single_takes_one_task_and_rejects_the_rest() {
    let t = Tasks::new(Acceptance::Single);
    let first = submit(&t, "one");
    assert_eq!(first.state, State::Submitted);
    assert!(first.id.starts_with("tsk_") && first.context_id.starts_with("ctx_"));
    let waiting = submit(&t, "two");
    assert_eq!((waiting.state, busy_text(&waiting)), (State::Rejected, BUSY));
    let k = take(&t);
    assert_eq!(
        (k.id.as_str(), k.text.as_str(), k.source),
        (first.id.as_str(), "one", "a2a")
    );
    assert_eq!(t.get(&k.id, None).unwrap().state, State::Working);
    let running = submit(&t, "three");
    assert_eq!(busy_text(&running), BUSY);
    t.finish(&k.id, done("answer\n"), 3);
    let after = submit(&t, "four");
    assert_eq!(busy_text(&after), CLOSING, "single ran its one task");
    let got = t.get(&k.id, None).unwrap();
    assert_eq!(got.state, State::Completed);
    assert_eq!(got.artifacts[0].name, "response");
    assert_eq!(got.artifacts[0].text, "answer\n");
}

#[test]
fn a_file_task_is_the_single_task() {
    let t = Tasks::new(Acceptance::Single);
    let f = t.start_file("from the file", 1);
    assert_eq!(f.source, "file");
    assert_eq!(busy_text(&submit(&t, "x")), BUSY);
    // It is the operator's task, not a client's: the door does not show or cancel it.
    assert!(t.get(&f.id, None).is_none());
    assert_eq!(t.cancel(&f.id, None, 2).unwrap_err().0, TASK_NOT_FOUND);
    t.finish(&f.id, done("x"), 3);
    assert_eq!(busy_text(&submit(&t, "y")), CLOSING);
}

#[test]
fn the_queue_holds_its_depth_and_runs_in_order() {
    let t = Tasks::new(Acceptance::Queue(2));
    let a = submit(&t, "a");
    let b = submit(&t, "b");
    let c = submit(&t, "c");
    assert_eq!((a.state, b.state), (State::Submitted, State::Submitted));
    assert_eq!(busy_text(&c), BUSY);
    let k = take(&t);
    assert_eq!(k.id, a.id);
    let d = submit(&t, "d");
    assert_eq!(d.state, State::Submitted, "room again once one started");
    t.finish(&k.id, done("x"), 3);
    assert_eq!(take(&t).id, b.id);
    assert!(matches!(
        t.next(Some(Duration::ZERO), &AtomicI32::new(0), || 4),
        Next::Task(k) if k.id == d.id
    ));
    assert!(matches!(
        t.next(Some(Duration::from_millis(5)), &AtomicI32::new(0), || 5),
        Next::Idle
    ));
    assert!(matches!(t.next(None, &AtomicI32::new(15), || 5), Next::Stopped));
}

#[test]
fn queue_depth_is_clamped() {
    let t = Tasks::new(Acceptance::Queue(usize::MAX));
    assert_eq!(t.acceptance(), Acceptance::Queue(MAX_QUEUE));
    assert_eq!(
        Tasks::new(Acceptance::Queue(0)).acceptance(),
        Acceptance::Queue(1)
    );
}

#[test]
fn the_counts_follow_each_send_cancel_and_end_and_each_change_is_told() {
    let t = Tasks::new(Acceptance::Queue(4));
    let told = Arc::new(AtomicU64::new(0));
    let told2 = told.clone();
    t.on_change(Box::new(move || {
        told2.fetch_add(1, Ordering::SeqCst);
    }));
    assert_eq!(t.counts(), (0, 0));
    let a = submit(&t, "a");
    let b = submit(&t, "b");
    assert_eq!((t.counts(), told.load(Ordering::SeqCst)), ((2, 2), 2));
    let running = take(&t);
    assert_eq!(running.id, a.id);
    assert_eq!(t.counts(), (2, 2), "one running, one waiting");
    t.cancel(&b.id, None, 3).unwrap();
    assert_eq!((t.counts(), told.load(Ordering::SeqCst)), ((1, 2), 3));
    t.finish(&a.id, done("a"), 4);
    assert_eq!((t.counts(), told.load(Ordering::SeqCst)), ((0, 2), 4));
}

#[test]
fn cancel_of_waiting_running_and_finished_tasks() {
    let t = Tasks::new(Acceptance::Queue(4));
    let killed = Arc::new(AtomicU64::new(0));
    let k2 = killed.clone();
    t.on_cancel(Box::new(move |id| {
        assert!(id.starts_with("tsk_"));
        k2.fetch_add(1, Ordering::SeqCst);
    }));
    let a = submit(&t, "a");
    let b = submit(&t, "b");
    let running = take(&t);
    assert_eq!(running.id, a.id);
    // A waiting task: canceled, never handed out, no child killed.
    assert_eq!(t.cancel(&b.id, None, 5).unwrap().state, State::Canceled);
    assert_eq!(killed.load(Ordering::SeqCst), 0);
    // The running task: its flag is set, its children go, and its end keeps it canceled.
    assert_eq!(t.cancel(&a.id, None, 6).unwrap().state, State::Canceled);
    assert!(running.cancel.load(Ordering::SeqCst));
    assert_eq!(killed.load(Ordering::SeqCst), 1);
    t.finish(&a.id, done("late"), 7);
    let after = t.get(&a.id, None).unwrap();
    assert_eq!((after.state, after.artifacts.len()), (State::Canceled, 0));
    assert!(matches!(
        t.next(Some(Duration::ZERO), &AtomicI32::new(0), || 8),
        Next::Idle
    ));
    assert_eq!(t.cancel(&a.id, None, 9).unwrap_err().0, TASK_NOT_CANCELABLE);
    assert_eq!(t.cancel("tsk_nope", None, 9).unwrap_err().0, TASK_NOT_FOUND);
    assert_eq!(t.generation(), 2, "two tasks reached a terminal state");
}

#[test]
fn close_rejects_what_waits_and_every_later_send() {
    let t = Tasks::new(Acceptance::Queue(4));
    let a = submit(&t, "a");
    t.close(5);
    let got = t.get(&a.id, None).unwrap();
    assert_eq!((got.state, busy_text(&got)), (State::Rejected, ENDED));
    assert_eq!(busy_text(&submit(&t, "b")), CLOSING);
    assert!(matches!(
        t.next(Some(Duration::ZERO), &AtomicI32::new(0), || 6),
        Next::Idle
    ));
}

#[test]
fn the_generation_counts_terminal_states() {
    let t = Tasks::new(Acceptance::Queue(4));
    assert_eq!(t.generation(), 0);
    submit(&t, "a");
    let k = take(&t);
    assert_eq!(t.generation(), 0);
    t.finish(&k.id, done("x"), 2);
    assert_eq!(t.generation(), 1);
    t.finish(&k.id, done("again"), 3);
    assert_eq!(t.generation(), 1, "a finished task does not finish twice");
}

#[test]
fn finished_tasks_are_dropped_oldest_first_beyond_the_cap() {
    let t = Tasks::new(Acceptance::Queue(4));
    let first = submit(&t, "first");
    let k = take(&t);
    t.finish(&k.id, done("x"), 2);
    for i in 0..MAX_FINISHED {
        submit(&t, &format!("t{i}"));
        let k = take(&t);
        t.finish(&k.id, done("x"), 2);
    }
    assert!(t.get(&first.id, None).is_none(), "the oldest finished task went");
    let inner = t.lock();
    assert_eq!(inner.done.len(), MAX_FINISHED);
    assert_eq!(inner.entries.len(), MAX_FINISHED);
    assert_eq!(inner.order.len(), MAX_FINISHED);
}

#[test]
fn list_pages_newest_first_with_filters() {
    let t = Tasks::new(Acceptance::Queue(8));
    let mut ids = Vec::new();
    for i in 0..5 {
        let mut r = send(&format!("t{i}"));
        r.context_id = Some(if i % 2 == 0 { "ctx_even" } else { "ctx_odd" }.into());
        ids.push(t.submit(&r, Origin::file(), Watch::None, 1).id);
    }
    let req = |size: u32, token: Option<String>| ListRequest {
        context_id: None,
        status: None,
        page_size: size,
        page_token: token,
        history_length: None,
        status_after_ms: None,
        include_artifacts: false,
    };
    let page = t.list(&req(2, None), None).unwrap();
    let got: Vec<&str> = page["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["id"].as_str().unwrap())
        .collect();
    assert_eq!(got, [ids[4].as_str(), ids[3].as_str()]);
    assert_eq!(page["totalSize"], 5);
    let token = page["nextPageToken"].as_str().unwrap().to_string();
    let next = t.list(&req(2, Some(token)), None).unwrap();
    assert_eq!(next["tasks"][0]["id"], ids[2].as_str());
    let even = ListRequest {
        context_id: Some("ctx_even".into()),
        ..req(50, None)
    };
    let page = t.list(&even, None).unwrap();
    assert_eq!(page["totalSize"], 3);
    assert_eq!(page["nextPageToken"], "");
    assert!(t.list(&req(2, Some("junk".into())), None).is_err());
}

#[test]
fn refused_sends_are_kept_apart_and_never_flush_answers() {
    let t = Tasks::new(Acceptance::Queue(1));
    let mut answered = Vec::new();
    for i in 0..MAX_FINISHED {
        submit(&t, &format!("t{i}"));
        let k = take(&t);
        t.finish(&k.id, done("x"), 2);
        answered.push(k.id);
    }
    submit(&t, "waiting");
    let mut refused = Vec::new();
    for i in 0..3 * MAX_REFUSED {
        let r = submit(&t, &format!("r{i}"));
        assert_eq!(busy_text(&r), BUSY);
        // The client that was refused can read its answer at once.
        assert_eq!(t.get(&r.id, None).unwrap().state, State::Rejected);
        refused.push(r.id);
    }
    assert!(
        answered.iter().all(|id| t.get(id, None).is_some()),
        "no answer was dropped for a refusal"
    );
    let kept = refused.iter().filter(|id| t.get(id, None).is_some()).count();
    assert_eq!(kept, MAX_REFUSED);
    assert!(t.get(refused.last().unwrap(), None).is_some() && t.get(&refused[0], None).is_none());
}

#[test]
fn a_long_task_outlives_the_ones_that_finished_while_it_ran() {
    let t = Tasks::new(Acceptance::Queue(4));
    let long = submit(&t, "long");
    let k = take(&t);
    assert_eq!(k.id, long.id);
    // Any client can finish tasks meanwhile: submit and cancel, more than the table keeps.
    for i in 0..MAX_FINISHED + 10 {
        let c = submit(&t, &format!("c{i}"));
        t.cancel(&c.id, None, 3).unwrap();
    }
    t.finish(&k.id, done("the long answer"), 4);
    let got = t
        .get(&long.id, None)
        .expect("the task that just finished is kept");
    assert_eq!(got.artifacts[0].text, "the long answer");
    assert_eq!(t.lock().done.len(), MAX_FINISHED);
}

#[test]
fn a_refused_send_evicts_nothing() {
    let t = Tasks::new(Acceptance::Queue(1));
    let first = submit(&t, "first");
    let k = take(&t);
    t.finish(&k.id, done("kept"), 2);
    submit(&t, "waiting");
    let big = "x".repeat(200 << 10);
    for _ in 0..400 {
        assert_eq!(busy_text(&submit(&t, &big)), BUSY);
    }
    assert!(
        t.get(&first.id, None).is_some(),
        "refusals made no room at an answer's cost"
    );
}

#[test]
fn a_held_delegation_keeps_the_wait_open_until_its_completion_is_in() {
    let t = Tasks::new(Acceptance::Queue(4));
    assert!(!t.delegated());
    t.hold();
    assert!(t.delegated());
    let (t2, stop) = (t.clone(), AtomicI32::new(0));
    let waiter = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        let got = t2.next(Some(Duration::ZERO), &stop, || 2);
        (got, started.elapsed())
    });
    // The completion arrives, then the child is seen gone.
    std::thread::sleep(Duration::from_millis(200));
    let c = submit(&t, "Delegated capsule finished.");
    t.release();
    let (got, waited) = waiter.join().unwrap();
    assert!(
        waited >= Duration::from_millis(150),
        "the zero idle wait did not end the session early"
    );
    match got {
        Next::Task(k) => assert_eq!(k.id, c.id),
        other => panic!("the completion was not taken: {other:?}"),
    }
    // Nothing is out any more: a zero wait ends at once.
    assert!(matches!(
        t.next(Some(Duration::ZERO), &AtomicI32::new(0), || 3),
        Next::Idle
    ));
    // A release with nothing held does not wrap around.
    t.release();
    assert!(matches!(
        t.next(Some(Duration::ZERO), &AtomicI32::new(0), || 4),
        Next::Idle
    ));
}

#[test]
fn completions_wait_in_the_background_lane_fifo_behind_every_other_task() {
    let t = Tasks::new(Acceptance::Queue(8));
    let from = |origin: &str| Origin {
        origin: origin.into(),
        trust: "trusted".into(),
        traceparent: None,
        owner: None,
    };
    let mut ids = Vec::new();
    for (text, origin) in [
        ("c1", "completion"),
        ("u1", "event"),
        ("c2", "completion"),
        ("p1", "peer"),
    ] {
        let task = t.submit(&send(text), from(origin), Watch::None, 1);
        ids.push((text, task.id));
    }
    let mut order = Vec::new();
    for _ in 0..2 {
        let k = take(&t);
        order.push(k.text.clone());
        // A person's task arriving while a completion waits still goes first.
        if k.text == "u1" {
            t.submit(&send("u2"), from("event"), Watch::None, 1);
        }
        t.finish(&k.id, done("x"), 3);
    }
    for _ in 0..3 {
        let k = take(&t);
        assert_eq!(k.origin.trust, "trusted", "the trust class travels with the task");
        order.push(k.text.clone());
        t.finish(&k.id, done("x"), 3);
    }
    assert_eq!(order, ["u1", "p1", "u2", "c1", "c2"]);
}
