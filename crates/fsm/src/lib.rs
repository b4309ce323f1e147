//! # ribshard-fsm: the BGP finite state machine (RFC 4271 section 8)
//!
//! Owns the session state machine as a pure function: `(state, event) -> (state, actions)`.
//! Timers, TCP and messages are inputs ([`Event`]) and outputs ([`Action`]); the session I/O
//! layer executes the actions and turns sockets and clocks into events.
//!
//! It must never do I/O, read a clock, or decode messages: the caller reports a decoded and
//! validated OPEN as [`Event::BgpOpen`], and a decoding error as the matching error event with
//! the NOTIFICATION it calls for.
//!
//! Optional session attributes of RFC 4271 section 8.1.1 that are implemented: DelayOpen,
//! passive TCP establishment, automatic restart through the IdleHoldTimer, and
//! SendNOTIFICATIONwithoutOPEN (always on: a peer learns why it was refused). Connection
//! collision detection (section 6.8) is decided by the session layer, which owns both
//! connections, and reported as [`Event::OpenCollisionDump`]. The send hold timer of RFC 9687
//! is event [`Event::SendHoldTimerExpires`].

use ribshard_wire::message::MessageType;
use ribshard_wire::notification::{cease, code, Notification};

/// Session states (RFC 4271 section 8.2.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    Idle,
    Connect,
    Active,
    OpenSent,
    OpenConfirm,
    Established,
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            State::Idle => "Idle",
            State::Connect => "Connect",
            State::Active => "Active",
            State::OpenSent => "OpenSent",
            State::OpenConfirm => "OpenConfirm",
            State::Established => "Established",
        })
    }
}

/// Inputs (RFC 4271 section 8.1, with their event numbers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// 1; with passive TCP establishment configured this is event 4.
    ManualStart,
    /// 2.
    ManualStop,
    /// 3; with passive TCP establishment, event 5.
    AutomaticStart,
    /// 8. Carries the Cease subcode to send (e.g. Maximum Number of Prefixes Reached).
    AutomaticStop(u8),
    /// 9.
    ConnectRetryTimerExpires,
    /// 10.
    HoldTimerExpires,
    /// 11.
    KeepaliveTimerExpires,
    /// 12.
    DelayOpenTimerExpires,
    /// 13.
    IdleHoldTimerExpires,
    /// 16: our outgoing connection was established.
    TcpCrAcked,
    /// 17: an incoming connection from the peer was accepted.
    TcpConnectionConfirmed,
    /// 18.
    TcpConnectionFails,
    /// 19 and 20: a valid OPEN, with the peer's proposed hold time.
    BgpOpen { hold_time: u16 },
    /// 21: a message header error; carries the NOTIFICATION to send.
    BgpHeaderErr(Notification),
    /// 22: an OPEN error; carries the NOTIFICATION to send.
    BgpOpenMsgErr(Notification),
    /// 23: connection collision resolution chose the other connection.
    OpenCollisionDump,
    /// 24: a NOTIFICATION reporting an unsupported version.
    NotifMsgVerErr,
    /// 25.
    NotifMsg,
    /// 26.
    KeepAliveMsg,
    /// 27.
    UpdateMsg,
    /// 28: an UPDATE that needs a session reset; carries the NOTIFICATION.
    UpdateMsgErr(Notification),
    /// A ROUTE-REFRESH (RFC 2918; not an RFC 4271 event): handled in Established, an FSM
    /// error before it (RFC 6608).
    RouteRefreshMsg,
    /// RFC 9687: the peer has not read from us for the send hold time.
    SendHoldTimerExpires,
}

/// Outputs, in the order to carry them out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    InitiateTcpConnection,
    /// Accept a connection from the peer (passive side).
    ListenForConnection,
    DropTcpConnection,
    SendOpen,
    SendKeepalive,
    SendNotification(Notification),
    /// Start or restart, seconds.
    StartConnectRetryTimer(u16),
    StopConnectRetryTimer,
    StartHoldTimer(u16),
    StopHoldTimer,
    StartKeepaliveTimer(u16),
    StopKeepaliveTimer,
    StartDelayOpenTimer(u16),
    StopDelayOpenTimer,
    StartIdleHoldTimer(u16),
    /// Entered Established with this negotiated hold time (0: no keepalives).
    SessionEstablished {
        hold_time: u16,
        keepalive_time: u16,
    },
    /// Leave the session: every route learned from the peer is withdrawn.
    ReleaseResources,
}

/// Session attributes the FSM needs (RFC 4271 section 8.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Our proposed hold time, seconds (0 or at least 3).
    pub hold_time: u16,
    /// ConnectRetryTime, seconds.
    pub connect_retry_time: u16,
    /// Wait for the peer's OPEN this long before sending ours (DelayOpen); `None`: off.
    pub delay_open: Option<u16>,
    /// Only accept connections; never initiate (PassiveTcpEstablishment).
    pub passive: bool,
    /// After a failure, restart automatically after this many seconds (IdleHoldTime);
    /// `None`: stay in Idle until a manual start.
    pub idle_hold_time: Option<u16>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            hold_time: 90,
            connect_retry_time: 30,
            delay_open: None,
            passive: false,
            idle_hold_time: Some(10),
        }
    }
}

/// The large hold timer value used while waiting for the peer's OPEN (RFC 4271 section 8.2.2
/// suggests 4 minutes).
pub const OPEN_HOLD_TIME: u16 = 240;

/// FSM error subcodes (RFC 6608 section 4).
pub mod fsm_error {
    /// An FSM error that is not an unexpected message (a timer event out of place).
    pub const UNSPECIFIED: u8 = 0;
    pub const UNEXPECTED_IN_OPENSENT: u8 = 1;
    pub const UNEXPECTED_IN_OPENCONFIRM: u8 = 2;
    pub const UNEXPECTED_IN_ESTABLISHED: u8 = 3;
}

#[derive(Clone, Debug)]
pub struct Fsm {
    state: State,
    config: Config,
    connect_retry_counter: u32,
    delay_open_running: bool,
    hold_time: u16,
}

impl Fsm {
    pub fn new(config: Config) -> Fsm {
        Fsm {
            state: State::Idle,
            config,
            connect_retry_counter: 0,
            delay_open_running: false,
            hold_time: 0,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// New settings from a configuration change, the session kept: ConnectRetryTime,
    /// PassiveTcpEstablishment, DelayOpen and IdleHoldTime apply from their next use; the
    /// hold time is what our OPEN proposes (RFC 4271 section 4.2), so a caller changes it
    /// only as it sends a new OPEN.
    pub fn set_config(&mut self, c: Config) {
        self.config = c;
    }
    /// ConnectRetryCounter: failed attempts since the last manual start or stop.
    pub fn connect_retry_counter(&self) -> u32 {
        self.connect_retry_counter
    }
    /// The negotiated hold time once an OPEN was received.
    pub fn negotiated_hold_time(&self) -> u16 {
        self.hold_time
    }

    /// Feeds one event; returns the actions to carry out, in order.
    pub fn handle(&mut self, event: Event) -> Vec<Action> {
        let mut a = Vec::new();
        let next = match self.state {
            State::Idle => self.idle(event, &mut a),
            State::Connect | State::Active => self.connect_or_active(event, &mut a),
            State::OpenSent => self.open_sent(event, &mut a),
            State::OpenConfirm => self.open_confirm(event, &mut a),
            State::Established => self.established(event, &mut a),
        };
        self.state = next;
        a
    }

    fn start(&mut self, a: &mut Vec<Action>) -> State {
        self.connect_retry_counter = 0;
        a.push(Action::StartConnectRetryTimer(
            self.config.connect_retry_time,
        ));
        if self.config.passive {
            a.push(Action::ListenForConnection);
            State::Active
        } else {
            a.push(Action::InitiateTcpConnection);
            State::Connect
        }
    }

    fn idle(&mut self, event: Event, a: &mut Vec<Action>) -> State {
        match event {
            Event::ManualStart | Event::AutomaticStart | Event::IdleHoldTimerExpires => {
                self.start(a)
            }
            // Section 8.2.2, Idle: ManualStop and every other event are ignored.
            _ => State::Idle,
        }
    }

    /// Leaves for Idle after a failure: release, drop, count, and schedule a restart.
    fn fail(&mut self, a: &mut Vec<Action>, count: bool) -> State {
        self.stop_all_timers(a);
        a.push(Action::ReleaseResources);
        a.push(Action::DropTcpConnection);
        if count {
            self.connect_retry_counter += 1;
        }
        if let Some(t) = self.config.idle_hold_time {
            a.push(Action::StartIdleHoldTimer(t));
        }
        State::Idle
    }

    /// Leaves for Idle on a manual stop: no restart, counter reset.
    fn stop(&mut self, a: &mut Vec<Action>) -> State {
        self.stop_all_timers(a);
        a.push(Action::ReleaseResources);
        a.push(Action::DropTcpConnection);
        self.connect_retry_counter = 0;
        State::Idle
    }

    fn stop_all_timers(&mut self, a: &mut Vec<Action>) {
        a.push(Action::StopConnectRetryTimer);
        if self.delay_open_running {
            a.push(Action::StopDelayOpenTimer);
            self.delay_open_running = false;
        }
        if matches!(
            self.state,
            State::OpenSent | State::OpenConfirm | State::Established
        ) {
            a.push(Action::StopHoldTimer);
            a.push(Action::StopKeepaliveTimer);
        }
    }

    fn send_open(&mut self, a: &mut Vec<Action>) -> State {
        a.push(Action::StopConnectRetryTimer);
        a.push(Action::SendOpen);
        a.push(Action::StartHoldTimer(OPEN_HOLD_TIME));
        State::OpenSent
    }

    /// Negotiates the hold time (RFC 4271 section 4.2: the smaller of the two) and starts
    /// the timers for OpenConfirm.
    fn accept_open(&mut self, peer_hold: u16, a: &mut Vec<Action>) {
        self.hold_time = self.config.hold_time.min(peer_hold);
        if self.hold_time > 0 {
            a.push(Action::StartKeepaliveTimer(self.keepalive_time()));
            a.push(Action::StartHoldTimer(self.hold_time));
        } else {
            a.push(Action::StopHoldTimer);
        }
    }

    fn keepalive_time(&self) -> u16 {
        (self.hold_time / 3).max(1)
    }

    fn connect_or_active(&mut self, event: Event, a: &mut Vec<Action>) -> State {
        let here = self.state;
        match event {
            Event::ManualStart | Event::AutomaticStart | Event::IdleHoldTimerExpires => here,
            Event::ManualStop => self.stop(a),
            Event::ConnectRetryTimerExpires => {
                if self.delay_open_running {
                    a.push(Action::StopDelayOpenTimer);
                    self.delay_open_running = false;
                }
                a.push(Action::StartConnectRetryTimer(
                    self.config.connect_retry_time,
                ));
                if self.config.passive {
                    State::Active
                } else {
                    if here == State::Connect {
                        a.push(Action::DropTcpConnection);
                    }
                    a.push(Action::InitiateTcpConnection);
                    State::Connect
                }
            }
            Event::DelayOpenTimerExpires if self.delay_open_running => {
                self.delay_open_running = false;
                self.send_open(a)
            }
            Event::TcpCrAcked | Event::TcpConnectionConfirmed => match self.config.delay_open {
                Some(t) => {
                    a.push(Action::StopConnectRetryTimer);
                    a.push(Action::StartDelayOpenTimer(t));
                    self.delay_open_running = true;
                    here
                }
                None => self.send_open(a),
            },
            Event::TcpConnectionFails => {
                if self.delay_open_running {
                    a.push(Action::StopDelayOpenTimer);
                    self.delay_open_running = false;
                    a.push(Action::StartConnectRetryTimer(
                        self.config.connect_retry_time,
                    ));
                    State::Active
                } else if here == State::Connect {
                    // Not counted (section 8.2.2, Connect); restarted after IdleHoldTime.
                    self.fail(a, false)
                } else {
                    a.push(Action::StartConnectRetryTimer(
                        self.config.connect_retry_time,
                    ));
                    a.push(Action::ReleaseResources);
                    self.connect_retry_counter += 1;
                    if let Some(t) = self.config.idle_hold_time {
                        a.push(Action::StartIdleHoldTimer(t));
                    }
                    State::Idle
                }
            }
            // Event 20: the peer's OPEN arrived while we delayed ours.
            Event::BgpOpen { hold_time } if self.delay_open_running => {
                a.push(Action::StopConnectRetryTimer);
                a.push(Action::StopDelayOpenTimer);
                self.delay_open_running = false;
                a.push(Action::SendOpen);
                a.push(Action::SendKeepalive);
                self.accept_open(hold_time, a);
                State::OpenConfirm
            }
            Event::BgpHeaderErr(n) | Event::BgpOpenMsgErr(n) => {
                a.push(Action::SendNotification(n));
                self.fail(a, true)
            }
            Event::NotifMsgVerErr => {
                let count = !self.delay_open_running;
                self.fail(a, count)
            }
            // Every other event: section 8.2.2 sends the FSM to Idle.
            _ => self.fail(a, true),
        }
    }

    fn notify_and_fail(&mut self, n: Notification, a: &mut Vec<Action>) -> State {
        a.push(Action::SendNotification(n));
        self.fail(a, true)
    }

    /// The FSM error for `event` in this state. RFC 6608 section 3: an unexpected message
    /// names the state it came in (the subcode) and its own type (the data, one octet).
    fn fsm_error(&self, event: &Event) -> Notification {
        let message_type = match event {
            Event::BgpOpen { .. } => Some(MessageType::Open),
            Event::UpdateMsg => Some(MessageType::Update),
            Event::KeepAliveMsg => Some(MessageType::Keepalive),
            Event::RouteRefreshMsg => Some(MessageType::RouteRefresh),
            _ => None,
        };
        let Some(t) = message_type else {
            return Notification::new(code::FSM, fsm_error::UNSPECIFIED, vec![]);
        };
        let sub = match self.state {
            State::OpenSent => fsm_error::UNEXPECTED_IN_OPENSENT,
            State::OpenConfirm => fsm_error::UNEXPECTED_IN_OPENCONFIRM,
            _ => fsm_error::UNEXPECTED_IN_ESTABLISHED,
        };
        Notification::new(code::FSM, sub, vec![t as u8])
    }

    /// Events handled alike in OpenSent, OpenConfirm and Established; `None` for the rest.
    fn common(&mut self, event: &Event, a: &mut Vec<Action>) -> Option<State> {
        Some(match event {
            Event::ManualStart | Event::AutomaticStart | Event::IdleHoldTimerExpires => self.state,
            Event::ManualStop => {
                a.push(Action::SendNotification(Notification::new(
                    code::CEASE,
                    cease::ADMINISTRATIVE_SHUTDOWN,
                    vec![],
                )));
                self.stop(a)
            }
            Event::AutomaticStop(sub) => {
                self.notify_and_fail(Notification::new(code::CEASE, *sub, vec![]), a)
            }
            Event::HoldTimerExpires => {
                self.notify_and_fail(Notification::new(code::HOLD_TIMER_EXPIRED, 0, vec![]), a)
            }
            Event::SendHoldTimerExpires => self.notify_and_fail(
                Notification::new(code::SEND_HOLD_TIMER_EXPIRED, 0, vec![]),
                a,
            ),
            // A second connection while this one proceeds: collision handling is the
            // session layer's; this connection is unaffected (section 8.2.2).
            Event::TcpCrAcked | Event::TcpConnectionConfirmed => self.state,
            Event::BgpHeaderErr(n) | Event::BgpOpenMsgErr(n) | Event::UpdateMsgErr(n) => {
                self.notify_and_fail(n.clone(), a)
            }
            Event::OpenCollisionDump => self.notify_and_fail(
                Notification::new(code::CEASE, cease::CONNECTION_COLLISION_RESOLUTION, vec![]),
                a,
            ),
            Event::NotifMsgVerErr | Event::NotifMsg => self.fail(a, true),
            // OpenConfirm and Established alike; OpenSent handles these itself.
            Event::KeepaliveTimerExpires if self.state != State::OpenSent => {
                a.push(Action::SendKeepalive);
                a.push(Action::StartKeepaliveTimer(self.keepalive_time()));
                self.state
            }
            Event::TcpConnectionFails if self.state != State::OpenSent => self.fail(a, true),
            _ => return None,
        })
    }

    fn open_sent(&mut self, event: Event, a: &mut Vec<Action>) -> State {
        if let Some(s) = self.common(&event, a) {
            return s;
        }
        match event {
            Event::TcpConnectionFails => {
                a.push(Action::DropTcpConnection);
                a.push(Action::StopHoldTimer);
                a.push(Action::StartConnectRetryTimer(
                    self.config.connect_retry_time,
                ));
                if self.config.passive {
                    a.push(Action::ListenForConnection);
                }
                State::Active
            }
            Event::BgpOpen { hold_time } => {
                if self.delay_open_running {
                    a.push(Action::StopDelayOpenTimer);
                    self.delay_open_running = false;
                }
                a.push(Action::StopConnectRetryTimer);
                a.push(Action::SendKeepalive);
                self.accept_open(hold_time, a);
                State::OpenConfirm
            }
            other => self.notify_and_fail(self.fsm_error(&other), a),
        }
    }

    fn open_confirm(&mut self, event: Event, a: &mut Vec<Action>) -> State {
        if let Some(s) = self.common(&event, a) {
            return s;
        }
        match event {
            Event::KeepAliveMsg => {
                if self.hold_time > 0 {
                    a.push(Action::StartHoldTimer(self.hold_time));
                }
                a.push(Action::SessionEstablished {
                    hold_time: self.hold_time,
                    keepalive_time: if self.hold_time > 0 {
                        self.keepalive_time()
                    } else {
                        0
                    },
                });
                State::Established
            }
            other => self.notify_and_fail(self.fsm_error(&other), a),
        }
    }

    fn established(&mut self, event: Event, a: &mut Vec<Action>) -> State {
        if let Some(s) = self.common(&event, a) {
            return s;
        }
        match event {
            Event::KeepAliveMsg | Event::UpdateMsg => {
                if self.hold_time > 0 {
                    a.push(Action::StartHoldTimer(self.hold_time));
                }
                State::Established
            }
            // RFC 4271 restarts the hold timer on KEEPALIVE and UPDATE only.
            Event::RouteRefreshMsg => State::Established,
            other => self.notify_and_fail(self.fsm_error(&other), a),
        }
    }
}
