//! Property test: `Chain::apply_raw` (actions on attribute bytes) gives exactly the bytes
//! `Chain::apply` and encoding give — attribute order, flags and length forms included — on
//! random attribute sets (with Extended Length where a sender chose it, lists long enough to
//! need it) and random combinations of the actions it handles; and it declines the actions
//! it does not make, and attributes out of type-code order.

mod common;

use common::*;
use proptest::prelude::*;
use ribshard_policy::{ApplyContext, Source, Subject};
use ribshard_wire::attributes::{AsPath, AttrValue, Attribute, PathAttributes};
use ribshard_wire::{attr, parse_attributes_only, Origin};

/// Terms whose conditions read communities the route may have, so that each route gets its
/// own combination of actions; none ends the chain before `last`.
const CONFIG: &str = r#"
[community.c1]
members = ["1:1"]
[community.c2]
members = ["1:2"]
[community.c3]
members = ["1:3"]
[community.c4]
members = ["1:4"]
[community.c5]
members = ["1:5"]
[community.c6]
members = ["1:6"]
[community.c7]
members = ["1:7"]
[community.c8]
members = ["1:8"]
[community.c9]
members = ["1:9"]
[community.add]
members = ["65000:100", "1:1", "large:65000:1:1", "target:65000:7"]
[community.wild]
members = ["1:*", "large:65000:*:*"]
[community.set]
members = ["65000:200", "large:65000:2:2"]
[community.all]
members = ["^.*$"]
[community.many]
members = [MANY]

[[policy-statement.edit.term]]
name = "lp"
from = { community = "c1" }
then = { local-preference = 200 }
[[policy-statement.edit.term]]
name = "lp-add"
from = { community = "c2" }
then = { local-preference = { add = 7 }, metric = { subtract = 3 } }
[[policy-statement.edit.term]]
name = "med"
from = { community = "c3" }
then = { metric = 40, origin = "egp" }
[[policy-statement.edit.term]]
name = "add"
from = { community = "c4" }
then = { community-add = "add" }
[[policy-statement.edit.term]]
name = "delete"
from = { community = "c5" }
then = { community-delete = "wild" }
[[policy-statement.edit.term]]
name = "set"
from = { community = "c6" }
then = { community-set = "set", local-preference = { subtract = 1 } }
[[policy-statement.edit.term]]
name = "many"
from = { community = "c7" }
then = { community-add = "many" }
[[policy-statement.edit.term]]
name = "delete-all"
from = { community = "c8" }
then = { community-delete = "all", community-add = "add" }
[[policy-statement.edit.term]]
name = "prepend"
from = { community = "c9" }
then = { as-path-prepend = 1 }
[[policy-statement.edit.term]]
name = "last"
then = { action = "accept" }
"#;

fn config() -> String {
    let many: Vec<String> = (0..70).map(|i| format!("\"2:{i}\"")).collect();
    CONFIG.replace("MANY", &many.join(", "))
}

/// An attribute set as a sender may have sent it: in type-code order mostly (a shuffled one
/// now and then), Extended Length on any attribute whose sender chose it.
#[derive(Clone, Debug)]
struct Case {
    values: Vec<AttrValue>,
    order: Vec<usize>,
    extended: Vec<bool>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(1u32..10, 0..4),
        prop::collection::vec(0u32..4, 0..3),
        prop::option::of(0u32..300),
        prop::option::of(0u32..5),
        0u8..3,
        prop::collection::vec(0u32..3, 0..2),
        any::<bool>(),
        prop::collection::vec(any::<bool>(), 8),
        prop_oneof![
            4 => Just((0..8).collect::<Vec<usize>>()),
            1 => Just((0..8).collect::<Vec<usize>>()).prop_shuffle(),
        ],
    )
        .prop_map(
            |(tags, other, lp, med, origin, large, ext, extended, order)| {
                let mut communities: Vec<u32> = tags.iter().map(|t| 1 << 16 | t).collect();
                communities.extend(other.iter().map(|o| 65000 << 16 | (100 + o)));
                communities.dedup();
                let mut values = vec![
                    AttrValue::Origin(Origin::from_u8(origin).unwrap()),
                    AttrValue::AsPath(AsPath::sequence([65001, 13335])),
                    AttrValue::NextHop("192.0.2.1".parse().unwrap()),
                ];
                values.extend(med.map(AttrValue::Med));
                values.extend(lp.map(AttrValue::LocalPref));
                if !communities.is_empty() {
                    values.push(AttrValue::Communities(communities));
                }
                if ext {
                    values.push(AttrValue::ExtCommunities(vec![[
                        0, 2, 0xfd, 0xe8, 0, 0, 0, 7,
                    ]]));
                }
                if !large.is_empty() {
                    values.push(AttrValue::LargeCommunities(
                        large.iter().map(|l| [65000, *l, *l]).collect(),
                    ));
                }
                Case {
                    order: order.into_iter().filter(|i| *i < values.len()).collect(),
                    values,
                    extended,
                }
            },
        )
}

impl Case {
    fn bytes(&self) -> Vec<u8> {
        let mut list = Vec::new();
        for &i in &self.order {
            let mut a = Attribute::new(self.values[i].clone());
            if self.extended[i] {
                a.flags |= attr::flags::EXTENDED_LENGTH;
            }
            list.push(a);
        }
        let mut raw = Vec::new();
        PathAttributes { list }.encode(&NORMALIZED, &mut raw);
        raw
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn raw_edits_equal_the_model(c in case()) {
        let p = policies(&config());
        let chain = p.chain(&["edit".to_string()], false, 65000).unwrap();
        let raw = c.bytes();
        let source = Source {
            address: "198.51.100.1".parse().unwrap(),
            peer_as: 65001,
            internal: false,
        };
        let s = Subject {
            prefix: pfx("198.51.100.0/24"),
            attrs: &raw,
            next_hop: &[192, 0, 2, 1],
            source: &source,
            receiver_as: None,
            rpki: Default::default(),
        };
        let v = chain.evaluate(&s);
        prop_assert!(v.accept);
        let model = PathAttributes::from_view(
            &parse_attributes_only(&raw, &NORMALIZED).unwrap().attrs,
            &NORMALIZED,
        );
        let m = chain.apply(&v, &s, model, &ApplyContext { own_as: 65000 });
        let mut want = Vec::new();
        m.attrs.encode(&NORMALIZED, &mut want);
        let mut got = vec![0xAA];
        let prepends = c.values.iter().any(|v| matches!(v, AttrValue::Communities(l) if l.contains(&(1 << 16 | 9))));
        let ordered = c.order.windows(2).all(|w| c.values[w[0]].type_code() < c.values[w[1]].type_code());
        match chain.apply_raw(&v, &raw, &mut got) {
            Some(done) => {
                prop_assert!(!prepends, "a prepend is the model's to make");
                prop_assert!(ordered, "out of order: the model's to place");
                prop_assert_eq!(&got[1..], &want[..]);
                prop_assert_eq!(done.local_pref_set, m.local_pref_set);
                prop_assert_eq!(done.med_set, m.med_set);
            }
            None => {
                prop_assert!(prepends || !ordered, "declined without a prepend, in order");
                prop_assert_eq!(got, vec![0xAA], "out untouched when declined");
            }
        }
    }
}
