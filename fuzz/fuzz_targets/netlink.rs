//! Any bytes as what the kernel answers on an rtnetlink socket: splitting messages, reading
//! errors, routes and nexthop objects must not panic; a route or object read is written back
//! to something that reads the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ribshard_fib::netlink::nexthop;
use ribshard_fib::netlink::route::{self, Forward, RouteKey, RouteNext};
use ribshard_fib::netlink::{Builder, Messages, NexthopMsg, RouteMsg};

fuzz_target!(|data: &[u8]| {
    for m in Messages::new(data) {
        let _ = m.error();
        if let Some(r) = RouteMsg::decode(m.payload) {
            // Written back with what it forwards to, it reads the same destination.
            let key = RouteKey {
                table: r.table,
                protocol: r.protocol,
                priority: r.priority,
            };
            let hops: Vec<_> = match &r.next {
                RouteNext::Via(h) => vec![*h],
                RouteNext::Multipath(m) => m.to_vec(),
                _ => Vec::new(),
            };
            let f = match r.next {
                RouteNext::Object(id) => Forward::Object(id),
                _ => Forward::Hops(&hops),
            };
            let mut b = Builder::default();
            route::put_replace(&mut b, 1, 0, &r.dst, &key, &f);
            let buf = b.finish().to_vec();
            let back = Messages::new(&buf)
                .next()
                .and_then(|m| RouteMsg::decode(m.payload));
            assert_eq!(back.map(|x| x.dst), Some(r.dst));
        }
        if let Some(n) = NexthopMsg::decode(m.payload) {
            let mut b = Builder::default();
            nexthop::put_replace(&mut b, 1, 0, n.id, n.protocol, &n.spec);
            let buf = b.finish().to_vec();
            let back = Messages::new(&buf)
                .next()
                .and_then(|m| NexthopMsg::decode(m.payload));
            assert_eq!(back.map(|x| x.id), Some(n.id));
        }
    }
});
