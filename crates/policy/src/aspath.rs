//! AS path regular expressions as Junos writes them (`"^65001 .* 13335$"`): the symbols are
//! AS numbers, not characters. Compiled once into a DFA over AS number classes: every AS
//! number the expression names (or range it names) splits the 32-bit space into intervals,
//! each interval is one input symbol, and matching a path is one table step per AS.
//!
//! Syntax: an AS number, a range `64512-65534`, `.` (any one AS), a set `[65000 65010-65020]`
//! or its complement `[^ ...]`, grouping `( )`, alternation `|`, and the repetitions `*`,
//! `+`, `?`, `{m}`, `{m,}`, `{m,n}`; terms are separated by spaces. The expression is matched
//! against the whole path (Junos anchors it at both ends; `^` and `$` may be written). An
//! AS_SET counts as one element, which a term matches if it matches any of the set's
//! members (so a bogon AS inside an aggregate's set is found, as BIRD's `bgp_path ~ set`
//! finds it); confederation segments are not matched.

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::util::start;
use regex_automata::Anchored;
use ribshard_wire::update::segment;
use std::fmt;

/// Why an AS path expression does not compile: the character (1-based) and the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad regular expression at character {position}: {reason}")]
pub struct RegexError {
    pub position: usize,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Ast {
    /// Inclusive ranges of AS numbers, complemented or not (`.` is an empty complement).
    Set {
        ranges: Vec<(u32, u32)>,
        negated: bool,
    },
    Concat(Vec<Ast>),
    Alt(Vec<Ast>),
    Repeat {
        of: Box<Ast>,
        min: u32,
        max: Option<u32>,
    },
    Empty,
}

struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn err(&self, reason: impl Into<String>) -> RegexError {
        RegexError {
            position: self.at + 1,
            reason: reason.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.at).copied()
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn number(&mut self) -> Result<u32, RegexError> {
        let start = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.at += 1;
        }
        let s = std::str::from_utf8(self.text.get(start..self.at).unwrap_or(&[])).unwrap_or("");
        if s.is_empty() {
            return Err(self.err("an AS number was expected"));
        }
        s.parse::<u32>().map_err(|_| RegexError {
            position: start + 1,
            reason: format!("{s} is not an AS number (at most 4294967295)"),
        })
    }

    /// An AS number or a range `a-b`.
    fn range(&mut self) -> Result<(u32, u32), RegexError> {
        let a = self.number()?;
        if self.peek() == Some(b'-') {
            self.at += 1;
            let b = self.number()?;
            if b < a {
                return Err(self.err(format!("the range {a}-{b} is empty")));
            }
            return Ok((a, b));
        }
        Ok((a, a))
    }

    fn alt(&mut self) -> Result<Ast, RegexError> {
        let mut arms = vec![self.concat()?];
        while self.peek() == Some(b'|') {
            self.at += 1;
            arms.push(self.concat()?);
        }
        Ok(if arms.len() == 1 {
            arms.pop().unwrap_or(Ast::Empty)
        } else {
            Ast::Alt(arms)
        })
    }

    fn concat(&mut self) -> Result<Ast, RegexError> {
        let mut items = Vec::new();
        loop {
            self.skip_space();
            match self.peek() {
                None | Some(b'|') | Some(b')') => break,
                Some(b'$') => {
                    self.at += 1;
                    self.skip_space();
                    if self.peek().is_some_and(|c| c != b'|' && c != b')') {
                        return Err(self.err("$ must end the expression"));
                    }
                }
                Some(b'^') => {
                    if !items.is_empty() {
                        return Err(self.err("^ must start the expression"));
                    }
                    self.at += 1;
                }
                Some(_) => {
                    let atom = self.atom()?;
                    items.push(self.repeats(atom)?);
                }
            }
        }
        Ok(match items.len() {
            0 => Ast::Empty,
            1 => items.pop().unwrap_or(Ast::Empty),
            _ => Ast::Concat(items),
        })
    }

    fn atom(&mut self) -> Result<Ast, RegexError> {
        match self.peek() {
            Some(b'.') => {
                self.at += 1;
                Ok(Ast::Set {
                    ranges: Vec::new(),
                    negated: true,
                })
            }
            Some(b'(') => {
                let open = self.at;
                self.at += 1;
                let inner = self.alt()?;
                if self.peek() != Some(b')') {
                    return Err(RegexError {
                        position: open + 1,
                        reason: "unbalanced parenthesis: this ( is never closed".into(),
                    });
                }
                self.at += 1;
                Ok(inner)
            }
            Some(b'[') => {
                let open = self.at;
                self.at += 1;
                self.skip_space();
                let negated = self.peek() == Some(b'^');
                if negated {
                    self.at += 1;
                }
                let mut ranges = Vec::new();
                loop {
                    self.skip_space();
                    match self.peek() {
                        Some(b']') => {
                            self.at += 1;
                            break;
                        }
                        Some(c) if c.is_ascii_digit() => ranges.push(self.range()?),
                        None => {
                            return Err(RegexError {
                                position: open + 1,
                                reason: "unbalanced bracket: this [ is never closed".into(),
                            })
                        }
                        Some(c) => {
                            return Err(self.err(format!(
                                "'{}' in a set: a set holds AS numbers and ranges",
                                c as char
                            )))
                        }
                    }
                }
                if ranges.is_empty() {
                    return Err(RegexError {
                        position: open + 1,
                        reason: "an empty set matches nothing".into(),
                    });
                }
                Ok(Ast::Set { ranges, negated })
            }
            Some(c) if c.is_ascii_digit() => {
                let r = self.range()?;
                Ok(Ast::Set {
                    ranges: vec![r],
                    negated: false,
                })
            }
            Some(c @ (b'*' | b'+' | b'?' | b'{')) => Err(self.err(format!(
                "'{}' repeats nothing: put it after an AS number, '.', a set or a group",
                c as char
            ))),
            Some(c) => Err(self.err(format!(
                "'{}' is not part of an AS path expression",
                c as char
            ))),
            None => Err(self.err("the expression ends too early")),
        }
    }

    fn repeats(&mut self, mut atom: Ast) -> Result<Ast, RegexError> {
        loop {
            let (min, max) = match self.peek() {
                Some(b'*') => (0, None),
                Some(b'+') => (1, None),
                Some(b'?') => (0, Some(1)),
                Some(b'{') => {
                    self.at += 1;
                    self.skip_space();
                    let m = self.number()?;
                    self.skip_space();
                    let n = match self.peek() {
                        Some(b',') => {
                            self.at += 1;
                            self.skip_space();
                            if self.peek() == Some(b'}') {
                                None
                            } else {
                                Some(self.number()?)
                            }
                        }
                        _ => Some(m),
                    };
                    self.skip_space();
                    if self.peek() != Some(b'}') {
                        return Err(self.err("a repetition {m,n} is not closed"));
                    }
                    if n.is_some_and(|n| n < m) {
                        return Err(
                            self.err(format!("{{{m},{}}} repeats backwards", n.unwrap_or(0)))
                        );
                    }
                    if n.unwrap_or(m) > 255 || m > 255 {
                        return Err(self.err("a repetition beyond 255 ASes cannot match a path"));
                    }
                    (m, n)
                }
                _ => return Ok(atom),
            };
            self.at += 1;
            atom = Ast::Repeat {
                of: Box::new(atom),
                min,
                max,
            };
        }
    }
}

/// AS number classes an expression may use (one byte each).
const MAX_CLASSES: usize = 256;

/// The shapes most AS path filters have, matched without the automaton: one pass over
/// the path, no class lookups.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Shape {
    /// `.* X .*`: some element is in the set.
    Contains(Elem),
    /// `X .*`: the first element is.
    Starts(Elem),
    /// `.* X`: the last element is.
    Ends(Elem),
    /// `.{m,n}`: the path has m to n elements.
    Length(u32, Option<u32>),
}

/// One element's test: AS numbers in ranges, or not in them.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Elem {
    ranges: Vec<(u32, u32)>,
    negated: bool,
}

impl Elem {
    #[inline]
    fn test_as(&self, a: u32) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= a && a <= hi) != self.negated
    }

    /// An element: one AS, or an AS_SET (matched where any member is).
    #[inline]
    fn test(&self, e: Element<'_>) -> bool {
        match e {
            Element::As(a) => self.test_as(a),
            Element::Set(members) => members
                .chunks_exact(4)
                .any(|c| self.test_as(u32::from_be_bytes(c.try_into().unwrap_or([0; 4])))),
        }
    }
}

/// One element of a path: an AS of a sequence, or an AS_SET's members (4 octets each).
#[derive(Clone, Copy)]
enum Element<'a> {
    As(u32),
    Set(&'a [u8]),
}

fn any_star(a: &Ast) -> bool {
    matches!(a, Ast::Repeat { of, min: 0, max: None } if matches!(&**of, Ast::Set { ranges, negated: true } if ranges.is_empty()))
}

fn elem(a: &Ast) -> Option<Elem> {
    match a {
        Ast::Set { ranges, negated } => Some(Elem {
            ranges: ranges.clone(),
            negated: *negated,
        }),
        _ => None,
    }
}

fn shape(a: &Ast) -> Option<Shape> {
    match a {
        Ast::Repeat { of, min, max } => match &**of {
            Ast::Set {
                ranges,
                negated: true,
            } if ranges.is_empty() => Some(Shape::Length(*min, *max)),
            _ => None,
        },
        Ast::Concat(v) => match v.as_slice() {
            [a, x, b] if any_star(a) && any_star(b) => elem(x).map(Shape::Contains),
            [x, b] if any_star(b) => elem(x).map(Shape::Starts),
            [a, x] if any_star(a) => elem(x).map(Shape::Ends),
            _ => None,
        },
        _ => None,
    }
}

/// Alternatives that are each one element are one set: `(1 | 2)` is `[1 2]`.
fn simplify(a: Ast) -> Ast {
    match a {
        Ast::Alt(arms) => {
            let arms: Vec<Ast> = arms.into_iter().map(simplify).collect();
            if arms
                .iter()
                .all(|x| matches!(x, Ast::Set { negated: false, .. }))
            {
                let ranges = arms
                    .into_iter()
                    .flat_map(|x| match x {
                        Ast::Set { ranges, .. } => ranges,
                        _ => Vec::new(),
                    })
                    .collect();
                Ast::Set {
                    ranges,
                    negated: false,
                }
            } else {
                Ast::Alt(arms)
            }
        }
        Ast::Concat(v) => Ast::Concat(v.into_iter().map(simplify).collect()),
        Ast::Repeat { of, min, max } => Ast::Repeat {
            of: Box::new(simplify(*of)),
            min,
            max,
        },
        other => other,
    }
}

/// A compiled AS path expression.
#[derive(Clone)]
pub struct AsPathRegex {
    pub source: String,
    shape: Option<Shape>,
    /// The first AS number of each class, ascending; class `i` is
    /// `bounds[i]..bounds[i + 1]`.
    bounds: Vec<u32>,
    dfa: dense::DFA<Vec<u32>>,
    start: regex_automata::util::primitives::StateID,
    /// A state from which every continuation matches (the state after `X` in `... X .*`):
    /// reaching it decides the match without reading the rest of the path.
    accepts_rest: Option<regex_automata::util::primitives::StateID>,
}

impl fmt::Debug for AsPathRegex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AsPathRegex({:?})", self.source)
    }
}

fn collect_bounds(a: &Ast, out: &mut Vec<u32>) {
    match a {
        Ast::Set { ranges, .. } => {
            for &(lo, hi) in ranges {
                out.push(lo);
                if let Some(next) = hi.checked_add(1) {
                    out.push(next);
                }
            }
        }
        Ast::Concat(v) | Ast::Alt(v) => v.iter().for_each(|x| collect_bounds(x, out)),
        Ast::Repeat { of, .. } => collect_bounds(of, out),
        Ast::Empty => {}
    }
}

impl AsPathRegex {
    /// Compiles an expression.
    pub fn new(source: &str) -> Result<AsPathRegex, RegexError> {
        let mut p = Parser {
            text: source.as_bytes(),
            at: 0,
        };
        let ast = p.alt()?;
        if p.peek() == Some(b')') {
            return Err(p.err("unbalanced parenthesis: this ) closes nothing"));
        }
        let ast = simplify(ast);
        let mut bounds = vec![0u32];
        collect_bounds(&ast, &mut bounds);
        bounds.sort_unstable();
        bounds.dedup();
        if bounds.len() > MAX_CLASSES {
            return Err(RegexError {
                position: 1,
                reason: format!(
                    "too many distinct AS numbers and ranges in one expression ({}; at most {}): \
                     split it into an as-path-group",
                    bounds.len() / 2,
                    MAX_CLASSES / 2
                ),
            });
        }
        let mut pattern = String::from("(?s-u:^(?:");
        translate(&ast, &bounds, &mut pattern);
        pattern.push_str(")$)");
        let dfa = dense::Builder::new()
            .configure(
                dense::Config::new()
                    .start_kind(StartKind::Anchored)
                    .dfa_size_limit(Some(8 << 20))
                    .determinize_size_limit(Some(16 << 20)),
            )
            .syntax(
                regex_automata::util::syntax::Config::new()
                    .unicode(false)
                    .utf8(false),
            )
            .thompson(regex_automata::nfa::thompson::Config::new().utf8(false))
            .build(&pattern)
            .map_err(|e| RegexError {
                position: 1,
                reason: format!("too complex to compile ({e})"),
            })?;
        let start = dfa
            .start_state(&start::Config::new().anchored(Anchored::Yes))
            .map_err(|e| RegexError {
                position: 1,
                reason: e.to_string(),
            })?;
        let accepts_rest = accepting_sink(&dfa, start, bounds.len());
        Ok(AsPathRegex {
            source: source.to_string(),
            shape: shape(&ast),
            bounds,
            dfa,
            start,
            accepts_rest,
        })
    }

    #[inline]
    fn class(&self, asn: u32) -> u8 {
        (self.bounds.partition_point(|&b| b <= asn).saturating_sub(1)) as u8
    }

    /// Whether the expression matches the whole AS_PATH (attribute value, 4-octet ASNs).
    #[inline]
    pub fn matches(&self, as_path: &[u8]) -> bool {
        match &self.shape {
            Some(s) => matches_shape(s, as_path),
            None => self.matches_dfa(as_path),
        }
    }

    fn matches_dfa(&self, as_path: &[u8]) -> bool {
        use regex_automata::util::primitives::StateID;
        // Usually one state; an AS_SET leaves one per member class that goes somewhere.
        let mut states: Vec<StateID> = Vec::new();
        let mut one = self.start;
        let mut many = false;
        let mut at = 0usize;
        while let (Some(&kind), Some(&n)) = (as_path.get(at), as_path.get(at + 1)) {
            let n = usize::from(n);
            let body = as_path.get(at + 2..at + 2 + 4 * n).unwrap_or(&[]);
            at += 2 + 4 * n;
            match kind {
                segment::AS_SEQUENCE => {
                    for c in body.chunks_exact(4) {
                        let class = self.class(u32::from_be_bytes(c.try_into().unwrap_or([0; 4])));
                        if many {
                            for st in states.iter_mut() {
                                *st = self.dfa.next_state(*st, class);
                            }
                        } else {
                            one = self.dfa.next_state(one, class);
                            if Some(one) == self.accepts_rest {
                                return true;
                            }
                        }
                    }
                }
                segment::AS_SET => {
                    let from: Vec<StateID> = if many { states.clone() } else { vec![one] };
                    states.clear();
                    for st in from {
                        for c in body.chunks_exact(4) {
                            let class =
                                self.class(u32::from_be_bytes(c.try_into().unwrap_or([0; 4])));
                            let next = self.dfa.next_state(st, class);
                            if !self.dfa.is_dead_state(next) && !states.contains(&next) {
                                states.push(next);
                            }
                        }
                    }
                    many = true;
                }
                _ => {}
            }
            if many {
                states.retain(|st| !self.dfa.is_dead_state(*st));
                match states.as_slice() {
                    [] => return false,
                    [only] => {
                        one = *only;
                        many = false;
                        states.clear();
                    }
                    _ => {}
                }
            } else if self.dfa.is_dead_state(one) {
                return false;
            }
        }
        let matching = |st: StateID| self.dfa.is_match_state(self.dfa.next_eoi_state(st));
        if many {
            states.into_iter().any(matching)
        } else {
            matching(one)
        }
    }

    /// The same over a list of AS numbers (one AS_SEQUENCE), for tests and `policy test`.
    pub fn matches_asns(&self, asns: &[u32]) -> bool {
        let mut path = Vec::with_capacity(2 + 4 * asns.len());
        for chunk in asns.chunks(255) {
            path.push(segment::AS_SEQUENCE);
            path.push(chunk.len() as u8);
            for a in chunk {
                path.extend_from_slice(&a.to_be_bytes());
            }
        }
        self.matches(&path)
    }
}

/// The state, if any, reachable from `start` that every class leads back to and that
/// matches at the end of input: once there, the path matches whatever follows. Found by a
/// search over at most 4,096 states (larger automata just do without the shortcut).
fn accepting_sink(
    dfa: &dense::DFA<Vec<u32>>,
    start: regex_automata::util::primitives::StateID,
    classes: usize,
) -> Option<regex_automata::util::primitives::StateID> {
    let mut seen = vec![start];
    let mut at = 0;
    while let Some(&st) = seen.get(at) {
        at += 1;
        let mut sink = dfa.is_match_state(dfa.next_eoi_state(st));
        for c in 0..classes {
            let next = dfa.next_state(st, c as u8);
            sink &= next == st;
            if !dfa.is_dead_state(next) && !seen.contains(&next) {
                if seen.len() >= 4096 {
                    return None;
                }
                seen.push(next);
            }
        }
        if sink {
            return Some(st);
        }
    }
    None
}

/// Calls `f` with each element of the path in order (an AS of a sequence, or an AS_SET;
/// confederation segments left out) until it returns true.
#[inline]
fn any_element<'a>(as_path: &'a [u8], mut f: impl FnMut(Element<'a>) -> bool) -> bool {
    let mut at = 0usize;
    while let (Some(&kind), Some(&n)) = (as_path.get(at), as_path.get(at + 1)) {
        let n = usize::from(n);
        let body = as_path.get(at + 2..at + 2 + 4 * n).unwrap_or(&[]);
        at += 2 + 4 * n;
        match kind {
            segment::AS_SEQUENCE => {
                for c in body.chunks_exact(4) {
                    if f(Element::As(u32::from_be_bytes(
                        c.try_into().unwrap_or([0; 4]),
                    ))) {
                        return true;
                    }
                }
            }
            segment::AS_SET if f(Element::Set(body)) => return true,
            _ => {}
        }
    }
    false
}

/// The segments of a path as (type, members' octets), confederation ones included.
fn segments(as_path: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let (&kind, &n) = (as_path.get(at)?, as_path.get(at + 1)?);
        let end = at + 2 + 4 * usize::from(n);
        let body = as_path.get(at + 2..end).unwrap_or(&[]);
        at = end;
        Some((kind, body))
    })
}

/// The last element of the path, read from the segment headers (what [`any_element`]
/// would give last).
fn last_element(as_path: &[u8]) -> Option<Element<'_>> {
    let mut last = None;
    for (kind, body) in segments(as_path) {
        match kind {
            segment::AS_SEQUENCE => {
                if let Some(c) = body.chunks_exact(4).next_back() {
                    last = Some(Element::As(u32::from_be_bytes(
                        c.try_into().unwrap_or([0; 4]),
                    )));
                }
            }
            segment::AS_SET => last = Some(Element::Set(body)),
            _ => {}
        }
    }
    last
}

/// How many elements [`any_element`] visits: each AS of a sequence, one per AS_SET.
fn elements(as_path: &[u8]) -> u32 {
    segments(as_path)
        .map(|(kind, body)| match kind {
            segment::AS_SEQUENCE => (body.len() / 4) as u32,
            segment::AS_SET => 1,
            _ => 0,
        })
        .sum()
}

fn matches_shape(s: &Shape, as_path: &[u8]) -> bool {
    match s {
        Shape::Contains(e) => any_element(as_path, |x| e.test(x)),
        Shape::Starts(e) => {
            let mut first = None;
            any_element(as_path, |x| {
                first = Some(x);
                true
            });
            first.is_some_and(|x| e.test(x))
        }
        Shape::Ends(e) => last_element(as_path).is_some_and(|x| e.test(x)),
        Shape::Length(min, max) => {
            let n = elements(as_path);
            n >= *min && max.is_none_or(|m| n <= m)
        }
    }
}

/// Writes the byte pattern of an expression: each AS number class is one byte.
fn translate(a: &Ast, bounds: &[u32], out: &mut String) {
    use fmt::Write;
    match a {
        Ast::Empty => {}
        Ast::Set { ranges, negated } => {
            let inside = |c: usize| {
                let lo = bounds.get(c).copied().unwrap_or(u32::MAX);
                ranges.iter().any(|&(a, b)| a <= lo && lo <= b)
            };
            let classes: Vec<usize> = (0..bounds.len())
                .filter(|&c| inside(c) != *negated)
                .collect();
            out.push('[');
            for c in classes {
                let _ = write!(out, "\\x{c:02X}");
            }
            out.push(']');
        }
        Ast::Concat(v) => v.iter().for_each(|x| translate(x, bounds, out)),
        Ast::Alt(v) => {
            out.push_str("(?:");
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    out.push('|');
                }
                translate(x, bounds, out);
            }
            out.push(')');
        }
        Ast::Repeat { of, min, max } => {
            out.push_str("(?:");
            translate(of, bounds, out);
            out.push(')');
            let _ = match max {
                None => write!(out, "{{{min},}}"),
                Some(m) => write!(out, "{{{min},{m}}}"),
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(s: &str) -> AsPathRegex {
        AsPathRegex::new(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn anchored_at_both_ends() {
        let r = re("^65001 .* 13335$");
        assert!(r.matches_asns(&[65001, 13335]));
        assert!(r.matches_asns(&[65001, 1, 2, 3, 13335]));
        assert!(!r.matches_asns(&[65001, 13335, 1]));
        assert!(!r.matches_asns(&[1, 65001, 13335]));
        // Implicit anchors, as Junos.
        let r = re("65001");
        assert!(r.matches_asns(&[65001]));
        assert!(!r.matches_asns(&[65001, 2]));
        assert!(re(".*").matches_asns(&[]));
        assert!(!re(".+").matches_asns(&[]));
    }

    #[test]
    fn repetition_sets_and_alternation() {
        let long = re(".{3,}");
        assert!(!long.matches_asns(&[1, 2]));
        assert!(long.matches_asns(&[1, 2, 3]));
        let exact = re("65000{2}");
        assert!(exact.matches_asns(&[65000, 65000]));
        assert!(!exact.matches_asns(&[65000]));
        let private = re(".* [64512-65534 4200000000-4294967294] .*");
        assert!(private.matches_asns(&[1, 64512, 2]));
        assert!(private.matches_asns(&[4200000001]));
        assert!(!private.matches_asns(&[1, 64511, 65535]));
        let not = re("[^ 65000] .*");
        assert!(not.matches_asns(&[65001, 65000]));
        assert!(!not.matches_asns(&[65000, 1]));
        let alt = re("(65001 | 65002) 13335?");
        assert!(alt.matches_asns(&[65002]));
        assert!(alt.matches_asns(&[65001, 13335]));
        assert!(!alt.matches_asns(&[65003, 13335]));
        let plus = re("65001+ 2");
        assert!(plus.matches_asns(&[65001, 65001, 2]));
        assert!(!plus.matches_asns(&[2]));
        assert!(re("65001.*").matches_asns(&[65001, 7]));
    }

    #[test]
    fn as_sets_are_one_element() {
        let mut path = vec![segment::AS_SEQUENCE, 1];
        path.extend_from_slice(&65001u32.to_be_bytes());
        path.extend_from_slice(&[segment::AS_SET, 2]);
        path.extend_from_slice(&1u32.to_be_bytes());
        path.extend_from_slice(&2u32.to_be_bytes());
        assert!(re("65001 .").matches(&path));
        assert!(re("65001 1").matches(&path), "a member matches");
        assert!(re("65001 2").matches(&path));
        assert!(!re("65001 3").matches(&path));
        assert!(!re("65001 1 2").matches(&path), "a set is one element");
        assert!(!re("65001 . .").matches(&path));
        assert!(re(".* [64512-65534 2] .*").matches(&path));
        // Different members lead different ways through the automaton.
        path.extend_from_slice(&[segment::AS_SEQUENCE, 1]);
        path.extend_from_slice(&6u32.to_be_bytes());
        assert!(re("(65001 1 5 | 65001 2 6)").matches(&path));
        assert!(re("(65001 1 6 | 65001 2 5)").matches(&path));
        assert!(!re("(65001 1 5 | 65001 2 5)").matches(&path));
    }

    #[test]
    fn stopping_where_the_rest_cannot_matter_changes_no_answer() {
        let tier1 = re("^(2497 | 4777) .* (3356 | 1299) .*");
        assert!(tier1.accepts_rest.is_some(), "found for a `.*` tail");
        assert!(
            re(".* 13335").accepts_rest.is_none(),
            "none when the end matters"
        );
        let seq = |asns: &[u32]| {
            let mut b = vec![segment::AS_SEQUENCE, asns.len() as u8];
            asns.iter()
                .for_each(|a| b.extend_from_slice(&a.to_be_bytes()));
            b
        };
        let set = |asns: &[u32]| {
            let mut b = seq(asns);
            b[0] = segment::AS_SET;
            b
        };
        let confed = |asns: &[u32]| {
            let mut b = seq(asns);
            b[0] = segment::AS_CONFED_SEQUENCE;
            b
        };
        let paths: Vec<Vec<u8>> = vec![
            seq(&[2497, 3356]),
            seq(&[2497, 1, 3356, 2, 3]),
            seq(&[2497, 1, 2]),
            seq(&[4777, 1299]),
            seq(&[1, 3356]),
            [seq(&[2497]), set(&[3356, 7])].concat(),
            [seq(&[2497, 3356]), set(&[7, 8]), seq(&[9])].concat(),
            [confed(&[3356]), seq(&[2497, 3356])].concat(),
            [seq(&[2497]), confed(&[3356])].concat(),
        ];
        for src in [
            "^(2497 | 4777) .* (3356 | 1299) .*",
            "2497 .*",
            ".* 3356 .*",
            "2497 3356 .+",
        ] {
            let r = re(src);
            let whole = AsPathRegex {
                accepts_rest: None,
                ..r.clone()
            };
            for p in &paths {
                assert_eq!(r.matches_dfa(p), whole.matches_dfa(p), "{src} on {p:?}");
            }
        }
        assert!(tier1.matches_dfa(&paths[1]) && !tier1.matches_dfa(&paths[2]));
    }

    #[test]
    fn shapes_match_as_the_automaton_does() {
        let paths: Vec<Vec<u32>> = vec![
            vec![],
            vec![65001],
            vec![65001, 13335],
            vec![1, 64512, 2],
            vec![13335, 1],
            vec![1, 2, 3, 4, 5],
        ];
        for src in [
            ".* [64512-65534] .*",
            "65001 .*",
            ".* 13335",
            ".{2,4}",
            ".{3,}",
            ".* [^ 1 2] .*",
            "(65001 | 1) .*",
        ] {
            let r = re(src);
            assert!(r.shape.is_some(), "{src} has a shape");
            for p in &paths {
                let mut bytes = vec![segment::AS_SEQUENCE, p.len() as u8];
                for a in p {
                    bytes.extend_from_slice(&a.to_be_bytes());
                }
                if p.is_empty() {
                    bytes.clear();
                }
                assert_eq!(r.matches(&bytes), r.matches_dfa(&bytes), "{src} on {p:?}");
            }
        }
        // With an AS_SET.
        let mut path = vec![segment::AS_SEQUENCE, 1];
        path.extend_from_slice(&65001u32.to_be_bytes());
        path.extend_from_slice(&[segment::AS_SET, 1]);
        path.extend_from_slice(&64512u32.to_be_bytes());
        for src in [
            ".* [64512] .*",
            ".* [^ 1] .*",
            ".{2}",
            ".* 65001",
            "65001 .*",
        ] {
            let r = re(src);
            assert_eq!(r.matches(&path), r.matches_dfa(&path), "{src}");
        }
    }

    #[test]
    fn errors_say_where() {
        let e = |s: &str| AsPathRegex::new(s).unwrap_err();
        assert_eq!(e("65001 (1 2").position, 7);
        assert_eq!(e("* 65001").position, 1);
        assert!(e("65001 x").reason.contains("'x'"));
        assert_eq!(e("[65001").position, 1);
        assert!(e("9999999999").reason.contains("not an AS number"));
        assert!(e(".{5,2}").reason.contains("backwards"));
        assert!(e("65000-1").reason.contains("empty"));
        assert!(e("1 2)").reason.contains("closes nothing"));
    }
}
