//! Drives the FSM through every state and event of RFC 4271 section 8.2.2, checking the next
//! state for each pair and the actions of the transitions that matter.

use ribshard_fsm::{fsm_error, Action, Config, Event, Fsm, State, OPEN_HOLD_TIME};
use ribshard_wire::notification::{cease, code, Notification};

fn n(c: u8, s: u8) -> Notification {
    Notification::new(c, s, vec![])
}

/// One event of each kind.
fn all_events() -> Vec<Event> {
    vec![
        Event::ManualStart,
        Event::ManualStop,
        Event::AutomaticStart,
        Event::AutomaticStop(cease::MAXIMUM_PREFIXES_REACHED),
        Event::ConnectRetryTimerExpires,
        Event::HoldTimerExpires,
        Event::KeepaliveTimerExpires,
        Event::DelayOpenTimerExpires,
        Event::IdleHoldTimerExpires,
        Event::TcpCrAcked,
        Event::TcpConnectionConfirmed,
        Event::TcpConnectionFails,
        Event::BgpOpen { hold_time: 90 },
        Event::BgpHeaderErr(n(1, 2)),
        Event::BgpOpenMsgErr(n(2, 2)),
        Event::OpenCollisionDump,
        Event::NotifMsgVerErr,
        Event::NotifMsg,
        Event::KeepAliveMsg,
        Event::UpdateMsg,
        Event::UpdateMsgErr(n(3, 1)),
        Event::SendHoldTimerExpires,
    ]
}

/// An FSM in `state`, reached the way a real session gets there.
fn fsm_in(state: State, config: Config) -> Fsm {
    let mut f = Fsm::new(config);
    let path: &[Event] = match state {
        State::Idle => &[],
        State::Connect | State::Active => &[Event::ManualStart],
        State::OpenSent => &[Event::ManualStart, Event::TcpCrAcked],
        State::OpenConfirm => &[
            Event::ManualStart,
            Event::TcpCrAcked,
            Event::BgpOpen { hold_time: 180 },
        ],
        State::Established => &[
            Event::ManualStart,
            Event::TcpCrAcked,
            Event::BgpOpen { hold_time: 180 },
            Event::KeepAliveMsg,
        ],
    };
    for e in path {
        f.handle(e.clone());
    }
    assert_eq!(f.state(), state);
    f
}

fn next_state(state: State, event: &Event) -> State {
    use Event as E;
    use State as S;
    match (state, event) {
        (S::Idle, E::ManualStart | E::AutomaticStart | E::IdleHoldTimerExpires) => S::Connect,
        (S::Idle, _) => S::Idle,
        (S::Connect, E::ManualStart | E::AutomaticStart | E::IdleHoldTimerExpires) => S::Connect,
        (S::Connect, E::ConnectRetryTimerExpires) => S::Connect,
        (S::Connect, E::TcpCrAcked | E::TcpConnectionConfirmed) => S::OpenSent,
        (S::Connect, _) => S::Idle,
        (S::Active, E::ManualStart | E::AutomaticStart | E::IdleHoldTimerExpires) => S::Active,
        (S::Active, E::ConnectRetryTimerExpires) => S::Active,
        (S::Active, E::TcpCrAcked | E::TcpConnectionConfirmed) => S::OpenSent,
        (S::Active, _) => S::Idle,
        (
            S::OpenSent,
            E::ManualStart
            | E::AutomaticStart
            | E::IdleHoldTimerExpires
            | E::TcpCrAcked
            | E::TcpConnectionConfirmed,
        ) => S::OpenSent,
        (S::OpenSent, E::TcpConnectionFails) => S::Active,
        (S::OpenSent, E::BgpOpen { .. }) => S::OpenConfirm,
        (S::OpenSent, _) => S::Idle,
        (
            S::OpenConfirm,
            E::ManualStart
            | E::AutomaticStart
            | E::IdleHoldTimerExpires
            | E::TcpCrAcked
            | E::TcpConnectionConfirmed
            | E::KeepaliveTimerExpires,
        ) => S::OpenConfirm,
        (S::OpenConfirm, E::KeepAliveMsg) => S::Established,
        (S::OpenConfirm, _) => S::Idle,
        (
            S::Established,
            E::ManualStart
            | E::AutomaticStart
            | E::IdleHoldTimerExpires
            | E::TcpCrAcked
            | E::TcpConnectionConfirmed
            | E::KeepaliveTimerExpires
            | E::KeepAliveMsg
            | E::UpdateMsg,
        ) => S::Established,
        (S::Established, _) => S::Idle,
    }
}

#[test]
fn every_state_and_event() {
    let states = [
        State::Idle,
        State::Connect,
        State::Active,
        State::OpenSent,
        State::OpenConfirm,
        State::Established,
    ];
    let mut checked = 0;
    for state in states {
        for event in all_events() {
            let config = Config {
                passive: state == State::Active,
                ..Config::default()
            };
            let mut f = fsm_in(state, config);
            let actions = f.handle(event.clone());
            let expected = next_state(state, &event);
            assert_eq!(f.state(), expected, "{state} + {event:?}: {actions:?}");
            if expected == State::Idle && state != State::Idle {
                // Leaving a session always releases it and closes the connection.
                assert!(
                    actions.contains(&Action::ReleaseResources),
                    "{state} + {event:?}"
                );
                assert!(
                    actions.contains(&Action::DropTcpConnection) || state == State::Active,
                    "{state} + {event:?}: {actions:?}"
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 6 * 22);
}

#[test]
fn full_handshake_negotiates_the_smaller_hold_time() {
    let mut f = Fsm::new(Config::default());
    assert_eq!(
        f.handle(Event::ManualStart),
        [
            Action::StartConnectRetryTimer(30),
            Action::InitiateTcpConnection
        ]
    );
    assert_eq!(
        f.handle(Event::TcpCrAcked),
        [
            Action::StopConnectRetryTimer,
            Action::SendOpen,
            Action::StartHoldTimer(OPEN_HOLD_TIME)
        ]
    );
    let a = f.handle(Event::BgpOpen { hold_time: 180 });
    assert!(a.contains(&Action::SendKeepalive));
    assert!(a.contains(&Action::StartHoldTimer(90)));
    assert!(a.contains(&Action::StartKeepaliveTimer(30)));
    let a = f.handle(Event::KeepAliveMsg);
    assert!(a.contains(&Action::SessionEstablished {
        hold_time: 90,
        keepalive_time: 30
    }));
    assert_eq!(f.state(), State::Established);
    // Keepalives and UPDATEs restart the hold timer.
    assert_eq!(f.handle(Event::UpdateMsg), [Action::StartHoldTimer(90)]);
    assert_eq!(
        f.handle(Event::KeepaliveTimerExpires),
        [Action::SendKeepalive, Action::StartKeepaliveTimer(30)]
    );
}

#[test]
fn zero_hold_time_means_no_keepalives() {
    let mut f = fsm_in(State::OpenSent, Config::default());
    let a = f.handle(Event::BgpOpen { hold_time: 0 });
    assert!(!a
        .iter()
        .any(|x| matches!(x, Action::StartKeepaliveTimer(_))));
    let a = f.handle(Event::KeepAliveMsg);
    assert!(a.contains(&Action::SessionEstablished {
        hold_time: 0,
        keepalive_time: 0
    }));
}

#[test]
fn notifications_sent_on_the_way_down() {
    let cases = [
        (Event::HoldTimerExpires, n(code::HOLD_TIMER_EXPIRED, 0)),
        (
            Event::SendHoldTimerExpires,
            n(code::SEND_HOLD_TIMER_EXPIRED, 0),
        ),
        (
            Event::AutomaticStop(cease::MAXIMUM_PREFIXES_REACHED),
            n(code::CEASE, cease::MAXIMUM_PREFIXES_REACHED),
        ),
        (
            Event::OpenCollisionDump,
            n(code::CEASE, cease::CONNECTION_COLLISION_RESOLUTION),
        ),
        (Event::UpdateMsgErr(n(3, 11)), n(3, 11)),
        (
            Event::BgpOpen { hold_time: 90 },
            Notification::new(code::FSM, fsm_error::UNEXPECTED_IN_ESTABLISHED, vec![1]),
        ),
        // Not a message: no state to name (RFC 6608 subcode 0).
        (
            Event::DelayOpenTimerExpires,
            n(code::FSM, fsm_error::UNSPECIFIED),
        ),
        (
            Event::ManualStop,
            n(code::CEASE, cease::ADMINISTRATIVE_SHUTDOWN),
        ),
    ];
    for (event, expected) in cases {
        let mut f = fsm_in(State::Established, Config::default());
        let a = f.handle(event.clone());
        assert_eq!(
            a.first(),
            Some(&Action::SendNotification(expected)),
            "{event:?}"
        );
    }
    // Unexpected messages name the state they arrived in and their type (RFC 6608
    // section 3: the data is the message type, one octet).
    let mut f = fsm_in(State::OpenSent, Config::default());
    let a = f.handle(Event::KeepAliveMsg);
    assert_eq!(
        a.first(),
        Some(&Action::SendNotification(Notification::new(
            code::FSM,
            fsm_error::UNEXPECTED_IN_OPENSENT,
            vec![4]
        )))
    );
    let mut f = fsm_in(State::OpenConfirm, Config::default());
    let a = f.handle(Event::UpdateMsg);
    assert_eq!(
        a.first(),
        Some(&Action::SendNotification(Notification::new(
            code::FSM,
            fsm_error::UNEXPECTED_IN_OPENCONFIRM,
            vec![2]
        )))
    );
    // A ROUTE-REFRESH is one too before Established, and nothing to the FSM after.
    let mut f = fsm_in(State::OpenConfirm, Config::default());
    let a = f.handle(Event::RouteRefreshMsg);
    assert_eq!(
        a.first(),
        Some(&Action::SendNotification(Notification::new(
            code::FSM,
            fsm_error::UNEXPECTED_IN_OPENCONFIRM,
            vec![5]
        )))
    );
    let mut f = fsm_in(State::Established, Config::default());
    assert!(f.handle(Event::RouteRefreshMsg).is_empty());
    assert_eq!(f.state(), State::Established);
}

#[test]
fn failures_count_and_restart_manual_stop_does_neither() {
    let mut f = fsm_in(State::Established, Config::default());
    let a = f.handle(Event::NotifMsg);
    assert!(a.contains(&Action::StartIdleHoldTimer(10)));
    assert_eq!(f.connect_retry_counter(), 1);
    // The automatic restart.
    assert_eq!(
        f.handle(Event::IdleHoldTimerExpires),
        [
            Action::StartConnectRetryTimer(30),
            Action::InitiateTcpConnection
        ]
    );
    let mut f = fsm_in(State::Established, Config::default());
    let a = f.handle(Event::ManualStop);
    assert!(!a.iter().any(|x| matches!(x, Action::StartIdleHoldTimer(_))));
    assert_eq!(f.connect_retry_counter(), 0);
    let mut f = fsm_in(
        State::Established,
        Config {
            idle_hold_time: None,
            ..Config::default()
        },
    );
    let a = f.handle(Event::NotifMsg);
    assert!(!a.iter().any(|x| matches!(x, Action::StartIdleHoldTimer(_))));
}

#[test]
fn passive_waits_for_the_peer() {
    let config = Config {
        passive: true,
        ..Config::default()
    };
    let mut f = Fsm::new(config);
    assert_eq!(
        f.handle(Event::ManualStart),
        [
            Action::StartConnectRetryTimer(30),
            Action::ListenForConnection
        ]
    );
    assert_eq!(f.state(), State::Active);
    // A passive session never initiates, even when the retry timer fires.
    let a = f.handle(Event::ConnectRetryTimerExpires);
    assert!(!a.contains(&Action::InitiateTcpConnection));
    f.handle(Event::TcpConnectionConfirmed);
    assert_eq!(f.state(), State::OpenSent);
}

#[test]
fn delay_open() {
    let config = Config {
        delay_open: Some(5),
        ..Config::default()
    };
    // The peer's OPEN arrives during the delay: send ours and a KEEPALIVE at once.
    let mut f = Fsm::new(config);
    f.handle(Event::ManualStart);
    let a = f.handle(Event::TcpCrAcked);
    assert_eq!(
        a,
        [
            Action::StopConnectRetryTimer,
            Action::StartDelayOpenTimer(5)
        ]
    );
    assert_eq!(f.state(), State::Connect);
    let a = f.handle(Event::BgpOpen { hold_time: 30 });
    assert_eq!(
        &a[..4],
        [
            Action::StopConnectRetryTimer,
            Action::StopDelayOpenTimer,
            Action::SendOpen,
            Action::SendKeepalive
        ]
    );
    assert_eq!(f.state(), State::OpenConfirm);
    assert_eq!(f.negotiated_hold_time(), 30);
    // The delay runs out: send our OPEN.
    let mut f = Fsm::new(config);
    f.handle(Event::ManualStart);
    f.handle(Event::TcpCrAcked);
    let a = f.handle(Event::DelayOpenTimerExpires);
    assert!(a.contains(&Action::SendOpen));
    assert_eq!(f.state(), State::OpenSent);
}

#[test]
fn lost_connection_in_opensent_goes_back_to_active() {
    let mut f = fsm_in(State::OpenSent, Config::default());
    let a = f.handle(Event::TcpConnectionFails);
    assert!(a.contains(&Action::DropTcpConnection));
    assert!(a.contains(&Action::StartConnectRetryTimer(30)));
    assert_eq!(f.state(), State::Active);
    // From Active the retry timer starts a new outgoing connection.
    let a = f.handle(Event::ConnectRetryTimerExpires);
    assert!(a.contains(&Action::InitiateTcpConnection));
    assert_eq!(f.state(), State::Connect);
}
