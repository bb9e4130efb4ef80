//! Incremental scan for the top-level JSON-RPC `method` of a request body.
//!
//! The HTTP layer reads a body chunk by chunk and must decide how to route it after
//! reading as little as possible, then pass every byte on unchanged. So the scanner never
//! copies the body: it keeps a few bytes of state (how much of a key matched `method`,
//! the decoded method value up to a cap, a nesting depth) and jumps through string
//! bodies with `memchr`.
//!
//! Why not a JSON crate: `serde_json` (and the streaming readers built like it) needs
//! the whole document in one buffer or pulls bytes through `std::io::Read`, so it cannot
//! stop between two chunks of a body and resume on the next without copying the body
//! into a buffer first; the pull parsers that do resume build tokens (keys, strings)
//! the scan has no use for. The scanner answers from a few bytes of state, reading
//! nothing after its answer, which is what a pass-through on the hot path needs.

use std::ops::Range;

use std::sync::LazyLock;

use memchr::memchr;
use memchr::memmem::Finder;

use super::text::{is_ws, quote_or_backslash, skip_space, structural};

/// Which method a request is, as far as the edge cares.
///
/// Public only for the `fuzzing` feature; not part of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `initialize`.
    Initialize,
    /// `server/discover`.
    Discover,
    /// `subscriptions/listen`.
    Listen,
    /// `resources/subscribe` (legacy era).
    Subscribe,
    /// Any other method: the edge passes it through untouched.
    Other,
}

impl Method {
    /// Classifies a method name, whether it came from the body or the `Mcp-Method`
    /// header. Exact and case-sensitive, as JSON-RPC method names are.
    pub(crate) fn from_name(name: &[u8]) -> Method {
        match name {
            b"initialize" => Method::Initialize,
            b"server/discover" => Method::Discover,
            b"subscriptions/listen" => Method::Listen,
            b"resources/subscribe" => Method::Subscribe,
            _ => Method::Other,
        }
    }

    /// True for the methods a layer intercepts (all but `Other`). Their
    /// bodies are small and buffered anyway, so the scanner checks them whole.
    pub(crate) fn is_intercepted(self) -> bool {
        !matches!(self, Method::Other)
    }
}

/// What the scanner learned about a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The top-level object's `method` member (a string).
    Method(Method),
    /// A top-level array (a legacy JSON-RPC batch). Decided as soon as the first
    /// non-whitespace byte is `[`.
    Batch,
    /// A top-level object that ended without a `method` member, or whose first `method`
    /// member is not a string.
    NoMethod,
    /// The top-level object has a second `method` member after an intercepted one;
    /// which one a server would honour is ambiguous, so the layer must not guess.
    DuplicateMethod,
    /// The bytes cannot be JSON of an object/array: bad syntax seen while scanning, a
    /// top-level scalar, or the body ended before the answer was known.
    Invalid,
}

/// The key the scanner looks for; keys are compared against it byte by byte as they
/// are decoded, so no key text is kept.
const METHOD_KEY: &[u8] = b"method";

/// How many decoded bytes of the method value are kept. Every name we classify is far
/// shorter, so a longer value is `Other` without further decoding.
const VALUE_CAP: usize = 32;

/// Where the scanner is in the grammar. Strings being decoded (a key that may still be
/// `method`, the method value) have their own states; every other string, nested value
/// and scalar is skipped without decoding. Fieldless, so dispatching on it is one jump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Before the first non-whitespace byte.
    Start,
    /// After the opening `{`: a key or `}`.
    BeforeFirstKey,
    /// After a `,`: a key must follow.
    BeforeKey,
    /// Inside a key whose first `key_len` decoded bytes equal `method`'s.
    Key,
    /// After a backslash in such a key.
    KeyEscape,
    /// Reading the hex digits of a `\u` escape in such a key.
    KeyHex,
    /// After a key other than `method`.
    Colon,
    /// After a `method` key.
    MethodColon,
    /// After the `:` of a member other than the first `method`.
    BeforeValue,
    /// After the `:` of the first `method` member.
    BeforeMethodValue,
    /// Inside the method value, decoding it into `value`.
    Value,
    /// After a backslash in the method value.
    ValueEscape,
    /// Reading the hex digits of a `\u` escape in the method value.
    ValueHex,
    /// After a backslash in a skipped string.
    SkipEscape,
    /// After a member value: `,` or `}` must follow.
    AfterValue,
    /// Inside a string that is not decoded; `then` says what it is.
    Skip,
    /// Inside a nested object/array member value, `depth` levels deep.
    Nested,
    /// Inside a number or literal (`true`, `false`, `null`) member value.
    Scalar,
}

impl State {
    /// The states [`Scanner::run`] skips through in bulk rather than byte by byte.
    fn is_bulk(self) -> bool {
        matches!(self, State::Skip | State::Nested | State::Scalar)
    }
}

/// What a skipped string is, hence where the scanner goes when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    /// A top-level key that is not `method`.
    Colon,
    /// A top-level member value.
    AfterValue,
    /// A string inside a nested value.
    Nested,
    /// The method value, already known to be too long for any intercepted name.
    OtherMethod,
}

/// A decoded JSON escape (the byte after a backslash).
enum Escape {
    /// A one-byte escape such as `\n` or `\"`.
    Byte(u8),
    /// `\u`, followed by four hex digits.
    Unicode,
}

/// How a bulk skip over a chunk ended.
enum Flow {
    /// The skipped construct ended; carry on from this index.
    Continue(usize),
    /// The chunk ended inside it; the state to resume in is saved.
    More,
    /// Bad syntax: the outcome is `Invalid`, decided by the byte just before this index.
    Invalid(usize),
}

/// Incremental scanner for the top-level `method` of a JSON-RPC request body.
///
/// Feed it the body's chunks in order; it answers as soon as the bytes seen so far
/// decide the outcome, so the caller can stop looking (never stop reading: the body is
/// forwarded whole regardless).
#[derive(Debug, Clone)]
pub(crate) struct Scanner {
    /// The grammar position.
    state: State,
    /// What the string being skipped is (`State::Skip`, `State::SkipEscape`).
    then: Then,
    /// The answer, once known; the scanner reads nothing after it.
    decided: Option<Outcome>,
    /// Bytes examined so far, up to and including the deciding byte.
    consumed: usize,
    /// Open brackets inside the member value being skipped (`State::Nested`). A counter,
    /// not a stack, so any nesting depth costs nothing.
    depth: usize,
    /// How many bytes of the current key matched `method` so far.
    key_len: u8,
    /// Hex digits of the current `\u` escape still to read.
    hex_left: u8,
    /// The code unit of the current `\u` escape so far.
    hex: u32,
    /// The method already read, kept until the object closes.
    method: Option<Method>,
    /// Whether an `Other` method is scanned to the object's end too, to catch
    /// a later duplicate `method` (see [`Scanner::whole`]).
    whole: bool,
    /// The decoded method value so far.
    value: [u8; VALUE_CAP],
    /// How many bytes of `value` are used.
    value_len: u8,
    /// A high surrogate from a `\u` escape, waiting for its low half.
    high: Option<u32>,
    /// Where the `id` value is in the body, when the one-pass path read it.
    id: Option<Range<usize>>,
    /// Where the first method's name is, once read whole: `start..end` of
    /// the body without escapes, [`DECODED`] when it is in `value`,
    /// [`UNKNOWN`] when not read (yet) or too long to keep. Two `u32`, not
    /// a range: the scanner is moved with every request it reads.
    name: (u32, u32),
}

/// [`Scanner`]'s `name`: the first method's name is not known.
const UNKNOWN: (u32, u32) = (0, 0);
/// [`Scanner`]'s `name`: the first method's name is `value`.
const DECODED: (u32, u32) = (u32::MAX, 0);

impl Default for Scanner {
    fn default() -> Self {
        Self::new()
    }
}

impl Scanner {
    /// A scanner at the start of a body.
    pub(crate) fn new() -> Self {
        Scanner {
            state: State::Start,
            then: Then::AfterValue,
            decided: None,
            consumed: 0,
            depth: 0,
            key_len: 0,
            hex_left: 0,
            hex: 0,
            method: None,
            whole: false,
            value: [0; VALUE_CAP],
            value_len: 0,
            high: None,
            id: None,
            name: UNKNOWN,
        }
    }

    /// A scanner that reads every body to the end of its top-level object, so
    /// that a second `method` is found after any first one. [`Scanner::method`]
    /// tells the first method as soon as it is read.
    pub(crate) fn whole() -> Self {
        Scanner {
            whole: true,
            ..Scanner::new()
        }
    }

    /// The first top-level method, once its value was read (even before the
    /// outcome is decided).
    pub(crate) fn method(&self) -> Option<Method> {
        match self.decided {
            Some(Outcome::Method(method)) => Some(method),
            _ => self.method,
        }
    }

    /// The name of the first top-level method, once read whole (`None`
    /// when it is longer than the scanner keeps); `body` is the body read
    /// so far.
    pub(crate) fn method_name<'a>(&'a self, body: &'a [u8]) -> Option<&'a [u8]> {
        match self.name {
            UNKNOWN => None,
            DECODED => Some(&self.value[..usize::from(self.value_len)]),
            (start, end) => body.get(start as usize..end as usize),
        }
    }

    /// The outcome, once decided.
    pub(crate) fn decided(&self) -> Option<Outcome> {
        self.decided
    }

    /// Feeds the next chunk (may be empty). Returns `Some(outcome)` once the answer is
    /// known; after that, further calls return the same outcome and read nothing. How
    /// many bytes were examined is reported by [`Scanner::consumed`].
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Option<Outcome> {
        self.feed_chunk(chunk, false)
    }

    /// [`Scanner::feed`] with the body's last chunk: when the skim reads the
    /// method and the bytes after it are [plain](is_plain), no second `method`
    /// can follow, and the method decides without them being scanned (bad
    /// syntax there is then left to whoever parses the body).
    pub(crate) fn feed_last(&mut self, chunk: &[u8]) -> Option<Outcome> {
        self.feed_chunk(chunk, true)
    }

    fn feed_chunk(&mut self, chunk: &[u8], last: bool) -> Option<Outcome> {
        if self.decided.is_some() {
            return self.decided;
        }
        let (before, mut from) = (self.consumed, 0);
        if before == 0 && self.state == State::Start {
            // Nothing was read before this chunk, so its offsets are the body's.
            match self.skim(chunk, last) {
                Ok(outcome) => return Some(outcome),
                Err(at) => from = at,
            }
        }
        match self.run(&chunk[from..]) {
            Some((read, outcome)) => {
                self.decide(before + from + read, outcome);
            }
            None => self.consumed = before + chunk.len(),
        }
        self.decided
    }

    /// Records the outcome, decided by the byte just before `at`.
    fn decide(&mut self, at: usize, outcome: Outcome) -> Outcome {
        self.consumed = at;
        self.decided = Some(outcome);
        outcome
    }

    /// The fast path over a body's first chunk: whole top-level members are read
    /// with tight loops, and keys and the method value compared as they stand.
    /// Whatever is unusual (an escaped key or method value, a method that is not
    /// a string, bad syntax, a key cut by the chunk's end) is left to the
    /// byte-wise grammar from the last point where both agree: `Err` with where
    /// [`Scanner::run`] goes on, in the state left for it.
    fn skim(&mut self, chunk: &[u8], last: bool) -> Result<Outcome, usize> {
        let mut i = skip_space(chunk, 0);
        if chunk.get(i) != Some(&b'{') {
            return Err(0);
        }
        i += 1;
        // The last point where the grammar can take over: its state and offset.
        let mut resume = (State::BeforeFirstKey, i);
        // The `id` values before the method: the span of the last, and how many.
        let (mut id, mut ids) = (None, 0usize);
        loop {
            i = skip_space(chunk, i);
            match chunk.get(i) {
                Some(b'"') => {}
                Some(b'}') if resume.0 == State::BeforeFirstKey => {
                    return Ok(self.decide(i + 1, self.end_object()));
                }
                _ => return Err(self.resume(resume)),
            }
            let Some(key_end) = plain_string(chunk, i + 1) else {
                return Err(self.resume(resume));
            };
            let key = &chunk[i + 1..key_end];
            let is_method = key == METHOD_KEY;
            if is_method && self.method.is_some() {
                return Ok(self.decide(key_end + 1, Outcome::DuplicateMethod));
            }
            i = skip_space(chunk, key_end + 1);
            if chunk.get(i) != Some(&b':') {
                return Err(self.resume(resume));
            }
            i = skip_space(chunk, i + 1);
            let end = if is_method {
                let end = match chunk.get(i) {
                    Some(b'"') => plain_string(chunk, i + 1),
                    _ => None,
                };
                let Some(end) = end else {
                    return Err(self.resume(resume));
                };
                let method = Method::from_name(&chunk[i + 1..end]);
                // Offsets in a chunk held in memory: far below 4 GiB.
                self.name = ((i + 1) as u32, end as u32);
                self.id = id.take().filter(|_| ids == 1);
                if !method.is_intercepted() && !self.whole {
                    // Other bodies may be huge and are never read past their method.
                    return Ok(self.decide(end + 1, Outcome::Method(method)));
                }
                if last && is_plain(&chunk[end + 1..]) {
                    return Ok(self.decide(chunk.len(), Outcome::Method(method)));
                }
                // Intercepted bodies are small and buffered anyway: check them whole.
                self.method = Some(method);
                end + 1
            } else {
                let start = i;
                let end = match chunk.get(i) {
                    Some(&first) => self.skim_value(chunk, i, first),
                    None => Err(false),
                };
                let end = match end {
                    Ok(end) => end,
                    // The chunk ended inside the value: the grammar goes on there.
                    Err(true) => return Err(chunk.len()),
                    Err(false) => return Err(self.resume(resume)),
                };
                if key == b"id" && self.method.is_none() {
                    ids += 1;
                    id = (chunk[start] != b'{' && chunk[start] != b'[').then_some(start..end);
                }
                end
            };
            resume = (State::AfterValue, end);
            i = skip_space(chunk, end);
            match chunk.get(i) {
                Some(b',') => {
                    i += 1;
                    resume = (State::BeforeKey, i);
                }
                Some(b'}') => return Ok(self.decide(i + 1, self.end_object())),
                _ => return Err(self.resume(resume)),
            }
        }
    }

    /// Puts the grammar in `state` at `at`.
    fn resume(&mut self, (state, at): (State, usize)) -> usize {
        self.state = state;
        at
    }

    /// Skims a member value other than the method's, starting with `first` at
    /// `chunk[i]`, with the bulk loops of [`Scanner::run`]: `Ok` just past it;
    /// `Err(true)` when the chunk ended inside it, in the state to go on in;
    /// `Err(false)` when it is for the grammar to read.
    fn skim_value(&mut self, chunk: &[u8], i: usize, first: u8) -> Result<usize, bool> {
        let flow = match first {
            b'"' => match plain_string(chunk, i + 1) {
                Some(end) => Flow::Continue(end + 1),
                None => {
                    self.then = Then::AfterValue;
                    self.skip_string(chunk, i + 1)
                }
            },
            b'{' | b'[' => {
                self.depth = 1;
                self.state = State::Nested;
                self.skip_nested(chunk, i + 1)
            }
            b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
                match chunk[i..].iter().position(|&c| !is_scalar_byte(c)) {
                    Some(len) => Flow::Continue(i + len),
                    None => {
                        self.state = State::Scalar;
                        Flow::More
                    }
                }
            }
            _ => return Err(false),
        };
        match flow {
            Flow::Continue(end) => Ok(end),
            Flow::More => Err(true),
            Flow::Invalid(_) => Err(false),
        }
    }

    /// The body ended after `only`, its one chunk, which was fed before the end
    /// was known: the outcome [`Scanner::feed_last`] gives it, so that the
    /// answer never depends on when a body tells that it ended.
    pub(crate) fn finish_after(&mut self, only: &[u8]) -> Outcome {
        if self.decided.is_none() && self.consumed == only.len() {
            let mut again = Scanner {
                whole: self.whole,
                ..Scanner::new()
            };
            if again.feed_last(only).is_some() {
                *self = again;
            }
        }
        self.finish()
    }

    /// The body ended. Returns the decided outcome, or `Invalid` if the body ended
    /// before one was known (a closed object has always been decided by its `}`).
    pub(crate) fn finish(&mut self) -> Outcome {
        *self.decided.get_or_insert(Outcome::Invalid)
    }

    /// Where the `id` value (a string without escapes or a scalar, not yet
    /// checked as JSON) is in the body, when the one-pass path read it before
    /// the method; a later `id` is not looked for.
    pub(crate) fn id(&self) -> Option<Range<usize>> {
        self.id.clone()
    }

    /// Total bytes examined over all chunks, up to and including the byte that decided
    /// the outcome; bytes after it are never counted, so the caller knows exactly how
    /// much of the body the decision rests on.
    pub(crate) fn consumed(&self) -> usize {
        self.consumed
    }

    /// Scans `chunk`; on a decision returns how many of its bytes were read (including
    /// the deciding one) and the outcome.
    ///
    /// [`Scanner::step`] alone handles every state byte by byte. The states that span
    /// many bytes (skipped strings, nested values, scalars) are run in bulk here instead,
    /// which is what keeps skipping a large `params` cheap; the tests check that both
    /// ways agree.
    fn run(&mut self, chunk: &[u8]) -> Option<(usize, Outcome)> {
        let mut i = 0;
        while i < chunk.len() {
            let flow = match self.state {
                State::Skip => match self.skip_string(chunk, i) {
                    Flow::Continue(end) => match self.string_skipped() {
                        Some(outcome) => return Some((end, outcome)),
                        None => Flow::Continue(end),
                    },
                    cut_or_invalid => cut_or_invalid,
                },
                State::Nested => self.skip_nested(chunk, i),
                State::Scalar => match chunk[i..].iter().position(|&c| !is_scalar_byte(c)) {
                    Some(len) => {
                        // The byte after a scalar belongs to what follows it.
                        self.state = State::AfterValue;
                        Flow::Continue(i + len)
                    }
                    None => Flow::More,
                },
                // The other states rarely last more than a few bytes each, so they run
                // one after another here until a bulk state starts.
                _ => loop {
                    let b = chunk[i];
                    i += 1;
                    if let Some(outcome) = self.step(b) {
                        return Some((i, outcome));
                    }
                    if i == chunk.len() || self.state.is_bulk() {
                        break Flow::Continue(i);
                    }
                },
            };
            match flow {
                Flow::Continue(next) => i = next,
                Flow::More => return None,
                Flow::Invalid(read) => return Some((read, Outcome::Invalid)),
            }
        }
        None
    }

    /// Skips a nested member value from `chunk[i..]` in one tight loop: only quotes and
    /// brackets matter, strings are jumped through, and the depth is a plain counter.
    fn skip_nested(&mut self, chunk: &[u8], mut i: usize) -> Flow {
        let mut depth = self.depth;
        let flow = loop {
            let Some(len) = structural(&chunk[i..]) else {
                break Flow::More;
            };
            i += len + 1;
            match chunk[i - 1] {
                b'"' => {
                    self.then = Then::Nested;
                    match self.skip_string(chunk, i) {
                        Flow::Continue(end) => i = end,
                        cut_or_invalid => break cut_or_invalid,
                    }
                }
                b'{' | b'[' => depth += 1,
                _ => {
                    depth -= 1;
                    if depth == 0 {
                        self.state = State::AfterValue;
                        break Flow::Continue(i);
                    }
                }
            }
        };
        self.depth = depth;
        flow
    }

    /// Skips a string body from `chunk[i..]` (inside the string, not after a
    /// backslash): `Continue` just after its closing quote, `Invalid` on a bad escape, or
    /// `More` with the state set to resume the string (after a backslash, if that was
    /// the chunk's last byte). Escapes are only checked for their first byte, which is
    /// enough to know where the string ends.
    #[inline]
    fn skip_string(&mut self, chunk: &[u8], mut i: usize) -> Flow {
        loop {
            let Some(len) = quote_or_backslash(&chunk[i..]) else {
                self.state = State::Skip;
                return Flow::More;
            };
            i += len + 1;
            if chunk[i - 1] == b'"' {
                return Flow::Continue(i);
            }
            match chunk.get(i) {
                Some(&b) if unescape(b).is_some() => i += 1,
                Some(_) => return Flow::Invalid(i + 1),
                None => {
                    self.state = State::SkipEscape;
                    return Flow::More;
                }
            }
        }
    }

    /// A skipped string's closing quote was read; returns the outcome if that decides it.
    fn string_skipped(&mut self) -> Option<Outcome> {
        self.state = match self.then {
            Then::Colon => State::Colon,
            Then::AfterValue => State::AfterValue,
            Then::Nested => State::Nested,
            // Other bodies may be huge and are never read past their method.
            Then::OtherMethod if !self.whole => return Some(Outcome::Method(Method::Other)),
            Then::OtherMethod => {
                self.method = Some(Method::Other);
                State::AfterValue
            }
        };
        None
    }

    /// Starts skipping a string (its opening quote was read).
    fn skip(&mut self, then: Then) {
        self.state = State::Skip;
        self.then = then;
    }

    /// Advances the grammar by one byte; returns the outcome if this byte decides it.
    #[inline]
    fn step(&mut self, b: u8) -> Option<Outcome> {
        match self.state {
            State::Start => match b {
                b'{' => self.state = State::BeforeFirstKey,
                b'[' => return Some(Outcome::Batch),
                _ if is_ws(b) => {}
                _ => return Some(Outcome::Invalid),
            },
            State::BeforeFirstKey | State::BeforeKey => match b {
                b'"' => {
                    self.key_len = 0;
                    self.state = State::Key;
                }
                // `{}`; after a `,` a key is required.
                b'}' if self.state == State::BeforeFirstKey => return Some(self.end_object()),
                _ if is_ws(b) => {}
                _ => return Some(Outcome::Invalid),
            },
            State::Key => match b {
                b'"' if usize::from(self.key_len) == METHOD_KEY.len() => {
                    if self.method.is_some() {
                        return Some(Outcome::DuplicateMethod);
                    }
                    self.state = State::MethodColon;
                }
                b'"' => self.state = State::Colon,
                b'\\' => self.state = State::KeyEscape,
                _ => self.key_char(u32::from(b)),
            },
            State::KeyEscape => match unescape(b) {
                Some(Escape::Byte(c)) => self.key_char(u32::from(c)),
                Some(Escape::Unicode) => self.start_hex(State::KeyHex),
                None => return Some(Outcome::Invalid),
            },
            State::KeyHex => match self.hex_digit(b) {
                None => return Some(Outcome::Invalid),
                Some(false) => {}
                // A surrogate half is never an ASCII letter, so pairs need no care here.
                Some(true) => self.key_char(self.hex),
            },
            State::Colon | State::MethodColon => match b {
                b':' if self.state == State::Colon => self.state = State::BeforeValue,
                b':' => self.state = State::BeforeMethodValue,
                _ if is_ws(b) => {}
                _ => return Some(Outcome::Invalid),
            },
            State::BeforeMethodValue => match b {
                b'"' => {
                    self.value_len = 0;
                    self.high = None;
                    self.state = State::Value;
                }
                b'{' | b'[' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n' if !self.whole => {
                    return Some(Outcome::NoMethod)
                }
                // A watching scan goes on: a later `method` could still be a listen.
                b'{' | b'[' => {
                    self.method = Some(Method::Other);
                    self.depth = 1;
                    self.state = State::Nested;
                }
                b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
                    self.method = Some(Method::Other);
                    self.state = State::Scalar;
                }
                _ if is_ws(b) => {}
                _ => return Some(Outcome::Invalid),
            },
            State::BeforeValue => match b {
                b'"' => self.skip(Then::AfterValue),
                b'{' | b'[' => {
                    self.depth = 1;
                    self.state = State::Nested;
                }
                b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => self.state = State::Scalar,
                _ if is_ws(b) => {}
                _ => return Some(Outcome::Invalid),
            },
            State::Value => match b {
                b'"' => {
                    let kind = if self.flush_high() {
                        if self.method.is_none() {
                            self.name = DECODED;
                        }
                        Method::from_name(&self.value[..usize::from(self.value_len)])
                    } else {
                        Method::Other
                    };
                    if !kind.is_intercepted() && !self.whole {
                        // Other bodies may be huge and are never read past their method.
                        return Some(Outcome::Method(kind));
                    }
                    // Intercepted bodies are small and buffered anyway: check them whole.
                    self.method = Some(kind);
                    self.state = State::AfterValue;
                }
                b'\\' => self.state = State::ValueEscape,
                _ => {
                    let fits = self.flush_high() && self.push(&[b]);
                    self.continue_value(fits);
                }
            },
            State::ValueEscape => match unescape(b) {
                Some(Escape::Byte(c)) => {
                    let fits = self.flush_high() && self.push(&[c]);
                    self.continue_value(fits);
                }
                Some(Escape::Unicode) => self.start_hex(State::ValueHex),
                None => return Some(Outcome::Invalid),
            },
            State::ValueHex => match self.hex_digit(b) {
                None => return Some(Outcome::Invalid),
                Some(false) => {}
                Some(true) => {
                    let fits = self.push_unit(self.hex);
                    self.continue_value(fits);
                }
            },
            State::Skip => match b {
                b'"' => return self.string_skipped(),
                b'\\' => self.state = State::SkipEscape,
                _ => {}
            },
            State::SkipEscape => match unescape(b) {
                // `\u` digits are plain bytes to a skipped string.
                Some(_) => self.state = State::Skip,
                None => return Some(Outcome::Invalid),
            },
            State::Nested => match b {
                b'"' => self.skip(Then::Nested),
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth -= 1;
                    if self.depth == 0 {
                        self.state = State::AfterValue;
                    }
                }
                _ => {}
            },
            State::Scalar => {
                if !is_scalar_byte(b) {
                    // The byte after a scalar belongs to what follows it.
                    self.state = State::AfterValue;
                    return self.after_value(b);
                }
            }
            State::AfterValue => return self.after_value(b),
        }
        None
    }

    /// The byte after a member value: `,`, `}` or whitespace.
    fn after_value(&mut self, b: u8) -> Option<Outcome> {
        match b {
            b',' => self.state = State::BeforeKey,
            b'}' => return Some(self.end_object()),
            _ if is_ws(b) => {}
            _ => return Some(Outcome::Invalid),
        }
        None
    }

    /// The answer when the top-level object closes.
    fn end_object(&self) -> Outcome {
        self.method.map_or(Outcome::NoMethod, Outcome::Method)
    }

    /// Matches one decoded key character against `method`; on the first mismatch the
    /// rest of the key is merely skipped.
    fn key_char(&mut self, c: u32) {
        let expected = METHOD_KEY.get(usize::from(self.key_len)).copied();
        if expected.map(u32::from) == Some(c) {
            self.key_len += 1;
            self.state = State::Key;
        } else {
            self.skip(Then::Colon);
        }
    }

    /// Begins reading the four hex digits of a `\u` escape in `state`.
    fn start_hex(&mut self, state: State) {
        self.hex_left = 4;
        self.hex = 0;
        self.state = state;
    }

    /// Adds a hex digit to the `\u` escape being read: `None` if `b` is not one, else
    /// whether the escape is complete (its code unit is then in `hex`).
    fn hex_digit(&mut self, b: u8) -> Option<bool> {
        let digit = char::from(b).to_digit(16)?;
        self.hex = self.hex << 4 | digit;
        self.hex_left -= 1;
        Some(self.hex_left == 0)
    }

    /// Keeps decoding the method value, or skips the rest once it is too long to be a
    /// name we classify.
    fn continue_value(&mut self, fits: bool) {
        if fits {
            self.state = State::Value;
        } else {
            self.skip(Then::OtherMethod);
        }
    }

    /// Appends decoded bytes to the method value; false if they do not fit.
    fn push(&mut self, bytes: &[u8]) -> bool {
        let len = usize::from(self.value_len);
        let Some(dest) = self.value.get_mut(len..len + bytes.len()) else {
            return false;
        };
        dest.copy_from_slice(bytes);
        // VALUE_CAP fits in a u8, so the new length does too.
        self.value_len = (len + bytes.len()) as u8;
        true
    }

    /// Appends a code point as UTF-8; a surrogate code point becomes U+FFFD.
    fn push_char(&mut self, c: u32) -> bool {
        let c = char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER);
        self.push(c.encode_utf8(&mut [0; 4]).as_bytes())
    }

    /// Appends a high surrogate left without its low half as U+FFFD, like lossy UTF-16
    /// decoding does; false if it does not fit.
    fn flush_high(&mut self) -> bool {
        match self.high.take() {
            Some(_) => self.push_char(0xFFFD),
            None => true,
        }
    }

    /// Appends one UTF-16 code unit from a `\u` escape, pairing surrogates.
    fn push_unit(&mut self, unit: u32) -> bool {
        match unit {
            0xD800..=0xDBFF => {
                let fits = self.flush_high();
                self.high = Some(unit);
                fits
            }
            0xDC00..=0xDFFF => match self.high.take() {
                Some(high) => self.push_char(0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00)),
                None => self.push_char(0xFFFD),
            },
            _ => self.flush_high() && self.push_char(unit),
        }
    }
}

/// True when `rest`, the bytes after a method, hold neither `method` nor a
/// backslash: no parser can read a second `method` key there, not even one
/// that decodes escapes in keys or accepts unquoted ones.
pub(crate) fn is_plain(rest: &[u8]) -> bool {
    static METHOD: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(METHOD_KEY));
    memchr(b'\\', rest).is_none() && METHOD.find(rest).is_none()
}

/// The end of the string whose body starts at `chunk[from]`: the index of
/// its closing quote, when no backslash comes first.
fn plain_string(chunk: &[u8], from: usize) -> Option<usize> {
    let end = from + quote_or_backslash(chunk.get(from..)?)?;
    (chunk[end] == b'"').then_some(end)
}

/// Bytes that can continue a number or a literal; anything else ends it.
fn is_scalar_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')
}

/// What the byte after a backslash means; `None` if JSON does not allow it.
fn unescape(b: u8) -> Option<Escape> {
    Some(Escape::Byte(match b {
        b'"' | b'\\' | b'/' => b,
        b'b' => 0x08,
        b'f' => 0x0C,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'u' => return Some(Escape::Unicode),
        _ => return None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new scanner, reading whole bodies if `whole`.
    fn scanner(whole: bool) -> Scanner {
        if whole {
            Scanner::whole()
        } else {
            Scanner::new()
        }
    }

    /// Feeds `chunks` in order, checking that a decision sticks, and returns the final
    /// outcome and `consumed()`.
    fn run_chunks<'a>(whole: bool, chunks: impl IntoIterator<Item = &'a [u8]>) -> (Outcome, usize) {
        let mut scanner = scanner(whole);
        let mut decided: Option<(Outcome, usize)> = None;
        let mut fed = 0;
        for chunk in chunks {
            fed += chunk.len();
            let got = scanner.feed(chunk);
            match decided {
                Some((outcome, consumed)) => {
                    assert_eq!(got, Some(outcome), "decision changed");
                    assert_eq!(scanner.consumed(), consumed, "read after deciding");
                }
                None => match got {
                    Some(outcome) => decided = Some((outcome, scanner.consumed())),
                    None => assert_eq!(scanner.consumed(), fed, "undecided but skipped bytes"),
                },
            }
        }
        let outcome = scanner.finish();
        if let Some((early, _)) = decided {
            assert_eq!(outcome, early);
        }
        assert_eq!(scanner.finish(), outcome, "finish is not idempotent");
        assert_eq!(scanner.feed(b"{}"), Some(outcome), "fed after finish");
        (outcome, scanner.consumed())
    }

    /// Feeds `input` to `step` alone, byte by byte: the reference the bulk paths of
    /// `run` must agree with.
    fn stepwise(whole: bool, input: &[u8]) -> (Outcome, usize) {
        let mut scanner = scanner(whole);
        for (at, &b) in input.iter().enumerate() {
            if let Some(outcome) = scanner.step(b) {
                return (outcome, at + 1);
            }
        }
        (Outcome::Invalid, input.len())
    }

    /// Scans `input` whole; split in two at every boundary; in chunks of 2 to 9 bytes at
    /// every phase; in 1-byte chunks interleaved with empty ones; and byte by byte through
    /// `step` alone. All must agree. Big inputs get sampled splits and fewer chunkings.
    /// Both modes are checked (`Scanner::new` and `Scanner::whole`); the answer is
    /// `Scanner::new`'s.
    fn scan(input: &[u8]) -> (Outcome, usize) {
        scan_mode(input, true);
        scan_mode(input, false)
    }

    fn scan_mode(input: &[u8], whole_body: bool) -> (Outcome, usize) {
        let whole = run_chunks(whole_body, [input]);
        assert_eq!(stepwise(whole_body, input), whole, "step alone");
        let small = input.len() <= 4096;
        let stride = if small { 1 } else { input.len() / 7 };
        let splits = (0..=input.len()).step_by(stride).chain([input.len()]);
        for at in splits {
            let (a, b) = input.split_at(at);
            assert_eq!(run_chunks(whole_body, [a, b]), whole, "split at {at}");
        }
        let sizes = if small { 2..10 } else { 3..4 };
        for size in sizes {
            for phase in 1..size {
                let (head, tail) = input.split_at(phase.min(input.len()));
                let chunks = [head].into_iter().chain(tail.chunks(size));
                assert_eq!(
                    run_chunks(whole_body, chunks),
                    whole,
                    "chunks of {size} after {phase}"
                );
            }
        }
        let empty: &[u8] = &[];
        let bytes = input.chunks(1).flat_map(|byte| [byte, empty]);
        assert_eq!(
            run_chunks(whole_body, [empty].into_iter().chain(bytes)),
            whole,
            "1-byte chunks"
        );
        whole
    }

    /// The outcome only.
    fn outcome(input: &[u8]) -> Outcome {
        scan(input).0
    }

    /// Index just after the `n`th (0-based) occurrence of `needle` in `input`.
    fn after(input: &[u8], needle: &[u8], n: usize) -> usize {
        let at = input
            .windows(needle.len())
            .enumerate()
            .filter(|(_, w)| *w == needle)
            .nth(n)
            .expect("needle present")
            .0;
        at + needle.len()
    }

    const INIT: Outcome = Outcome::Method(Method::Initialize);
    const DISCOVER: Outcome = Outcome::Method(Method::Discover);
    const LISTEN: Outcome = Outcome::Method(Method::Listen);
    const OTHER: Outcome = Outcome::Method(Method::Other);

    #[test]
    fn the_first_methods_name_is_kept_however_it_is_spelled() {
        let name = |chunks: &[&[u8]]| {
            let mut scanner = Scanner::new();
            let body: Vec<u8> = chunks.concat();
            for (i, chunk) in chunks.iter().enumerate() {
                match i + 1 == chunks.len() {
                    true => scanner.feed_last(chunk),
                    false => scanner.feed(chunk),
                };
            }
            scanner.method_name(&body).map(<[u8]>::to_vec)
        };
        let plain: &[u8] = br#"{"id":1,"method":"tools/call","params":{}}"#;
        assert_eq!(name(&[plain]).as_deref(), Some(&b"tools/call"[..]));
        let escaped: &[u8] = br#"{"method":"tools\/c\u0061ll"}"#;
        assert_eq!(name(&[escaped]).as_deref(), Some(&b"tools/call"[..]));
        let (head, tail) = plain.split_at(20);
        assert_eq!(name(&[head, tail]).as_deref(), Some(&b"tools/call"[..]));
        let long = format!(r#"{{"method":"{}"}}"#, "x".repeat(VALUE_CAP + 1));
        let (head, tail) = long.as_bytes().split_at(5);
        assert_eq!(name(&[head, tail]), None);
        assert_eq!(name(&[br#"{"id":1}"#]), None);
    }

    #[test]
    fn classifies_names() {
        assert_eq!(Method::from_name(b"initialize"), Method::Initialize);
        assert_eq!(Method::from_name(b"server/discover"), Method::Discover);
        assert_eq!(Method::from_name(b"subscriptions/listen"), Method::Listen);
        assert_eq!(Method::from_name(b"resources/subscribe"), Method::Subscribe);
        for name in [
            &b""[..],
            b"Initialize",
            b"initialize ",
            b"tools/call",
            b"server/discover/",
        ] {
            assert_eq!(Method::from_name(name), Method::Other);
        }
        assert!(Method::Initialize.is_intercepted());
        assert!(Method::Discover.is_intercepted());
        assert!(Method::Listen.is_intercepted());
        assert!(Method::Subscribe.is_intercepted());
        assert!(!Method::Other.is_intercepted());
    }

    #[test]
    fn method_first_middle_last() {
        let first =
            br#"{"method":"initialize","jsonrpc":"2.0","id":1,"params":{"a":[1,{"b":"c"}]}}"#;
        assert_eq!(scan(first), (INIT, first.len()));
        let middle = br#"{"jsonrpc":"2.0","method":"server/discover","id":"x","params":{}}"#;
        assert_eq!(scan(middle), (DISCOVER, middle.len()));
        let last = br#"{"jsonrpc":"2.0","id":7,"params":{"a":[true,null,-1.5e3]},"method":"subscriptions/listen"}"#;
        assert_eq!(scan(last), (LISTEN, last.len()));
    }

    #[test]
    fn other_stops_after_its_value() {
        let body = br#"{"jsonrpc":"2.0","method":"tools/call","params":{"huge":"..."},"id":1}"#;
        assert_eq!(scan(body), (OTHER, after(body, b"\"tools/call\"", 0)));
        // What follows is never read, not even when it is broken or missing.
        let broken = br#"  {"method" : "ping" ]]] not json"#;
        assert_eq!(scan(broken), (OTHER, after(broken, b"\"ping\"", 0)));
        let cut = br#"{"method":"ping""#;
        assert_eq!(scan(cut), (OTHER, cut.len()));
    }

    #[test]
    fn intercepted_reads_to_the_closing_brace() {
        let body = b"{\"method\":\"initialize\",\"id\":1}  \n\t trailing junk";
        assert_eq!(scan(body), (INIT, after(body, b"}", 0)));
        let spaced = b" \r\n\t{ \"method\" :\n\"server/discover\" , \"id\" : 1 }";
        assert_eq!(scan(spaced), (DISCOVER, spaced.len()));
    }

    #[test]
    fn duplicate_method() {
        let body = br#"{"method":"subscriptions/listen","id":1,"method":"tools/call"}"#;
        assert_eq!(
            scan(body),
            (Outcome::DuplicateMethod, after(body, b"\"method\"", 1))
        );
        let escaped = br#"{"method":"initialize","\u006dethod":5}"#;
        assert_eq!(
            scan(escaped),
            (Outcome::DuplicateMethod, after(escaped, b"ethod\"", 1))
        );
        let same = br#"{"method":"initialize","method":"initialize"}"#;
        assert_eq!(outcome(same), Outcome::DuplicateMethod);
        // An Other method decides first; the second one is never seen.
        let other = br#"{"method":"tools/call","method":"initialize"}"#;
        assert_eq!(scan(other), (OTHER, after(other, b"\"tools/call\"", 0)));
        // A non-string first method decides NoMethod before any duplicate.
        assert_eq!(
            outcome(br#"{"method":1,"method":"initialize"}"#),
            Outcome::NoMethod
        );
    }

    #[test]
    fn escaped_keys_and_values() {
        assert_eq!(
            outcome(br#"{"\u006dethod":"subscriptions\/listen"}"#),
            LISTEN
        );
        assert_eq!(outcome(br#"{"m\u0065th\u006Fd":"\u0069nitialize"}"#), INIT);
        assert_eq!(outcome(br#"{"method":"server\u002fdiscover"}"#), DISCOVER);
        assert_eq!(outcome(br#"{"method":"server\u002Fdiscover"}"#), DISCOVER);
        assert_eq!(outcome(br#"{"method":"initialize\n"}"#), OTHER);
        assert_eq!(outcome(br#"{"method":"initializ\u0065"}"#), INIT);
        assert_eq!(outcome(br#"{"method":"\"initialize\""}"#), OTHER);
    }

    #[test]
    fn surrogates_decode_or_mismatch() {
        assert_eq!(outcome(br#"{"method":"\ud83d\ude00"}"#), OTHER);
        assert_eq!(outcome(br#"{"method":"\ud800initialize"}"#), OTHER);
        assert_eq!(outcome(br#"{"method":"initialize\udc00"}"#), OTHER);
        assert_eq!(outcome(br#"{"method":"\ud800\ud800"}"#), OTHER);
        assert_eq!(
            outcome(br#"{"\ud800method":"initialize"}"#),
            Outcome::NoMethod
        );

        let decoded = |input: &[u8]| {
            let mut scanner = Scanner::new();
            for byte in input.chunks(1) {
                assert_eq!(scanner.feed(byte), None);
            }
            scanner.flush_high();
            scanner.value[..usize::from(scanner.value_len)].to_vec()
        };
        assert_eq!(
            decoded(br#"{"method":"a\ud83d\ude00b"#),
            "a\u{1F600}b".as_bytes()
        );
        assert_eq!(
            decoded(br#"{"method":"\u00e9\u20AC"#),
            "\u{e9}\u{20ac}".as_bytes()
        );
        assert_eq!(
            decoded(br#"{"method":"\ud83dx\ude00"#),
            "\u{FFFD}x\u{FFFD}".as_bytes()
        );
        assert_eq!(
            decoded(br#"{"method":"\ud83d\ud83d\ude00"#),
            "\u{FFFD}\u{1F600}".as_bytes()
        );
        assert_eq!(decoded(br#"{"method":"\ud83d"#), "\u{FFFD}".as_bytes());
    }

    #[test]
    fn long_values_are_other() {
        let mut body = br#"{"method":"initialize"#.to_vec();
        body.extend([b' '; 60]);
        body.extend(br#"","id":1}"#);
        assert_eq!(scan(&body), (OTHER, after(&body, b" \"", 0)));

        let mut long = br#"{"method":""#.to_vec();
        long.extend(std::iter::repeat_n(&br#"\u0041\"\\"#[..], 200).flatten());
        long.extend(br#"","id":1}"#);
        assert_eq!(scan(&long), (OTHER, long.len() - br#","id":1}"#.len()));

        // Exactly at the cap still decodes; an escape straddling it does not fit.
        let mut capped = br#"{"method":""#.to_vec();
        capped.extend([b'x'; VALUE_CAP]);
        capped.extend(br#""}"#);
        assert_eq!(outcome(&capped), OTHER);
        let mut straddle = br#"{"method":""#.to_vec();
        straddle.extend([b'x'; VALUE_CAP - 1]);
        straddle.extend(br#"\u00e9"}"#);
        assert_eq!(outcome(&straddle), OTHER);
    }

    #[test]
    fn the_common_body_is_decided_in_one_pass() {
        let body = br#" { "jsonrpc" : "2.0", "id":-1.5e3 ,"method":"tools/call","params":{}}"#;
        let read = after(body, b"tools/call\"", 0);
        let id = after(body, b"\"id\":", 0);
        let mut scanner = Scanner::new();
        assert_eq!(scanner.feed(body), Some(OTHER));
        assert_eq!(scanner.consumed(), read);
        assert_eq!(scanner.id(), Some(id..id + 6));
        assert_eq!(outcome(body), OTHER);
        // An intercepted method is read the same way; the scanner goes on after it.
        let listen = br#"{"id":"a b","method":"subscriptions/listen","params":{"method":1}}"#;
        let mut scanner = Scanner::new();
        assert_eq!(scanner.feed(listen), Some(LISTEN));
        assert_eq!(scanner.consumed(), listen.len());
        assert_eq!(&listen[scanner.id().unwrap()], br#""a b""#);
        // Nested values and escaped strings before the method are skimmed too.
        let nested = br#"{"params":{"a":["}",{"b":"\""}]},"id":"\u0031","method":"tools/call"}"#;
        let mut scanner = Scanner::new();
        assert_eq!(scanner.feed(nested), Some(OTHER));
        assert_eq!(scanner.consumed(), nested.len() - 1);
        assert_eq!(&nested[scanner.id().unwrap()], br#""\u0031""#);
        let twice = br#"{"method":"initialize","method":"x"}"#;
        let mut scanner = Scanner::new();
        assert_eq!(scanner.feed(twice), Some(Outcome::DuplicateMethod));
        assert_eq!(scanner.consumed(), after(twice, b"\"method\"", 1));
        assert_eq!(scanner.id(), None);
        for (body, expected) in [
            (
                &br#"{"method":"server/discover","params":{}}"#[..],
                DISCOVER,
            ),
            (
                br#"{"method":"server/discover","params":{"method":1}}"#,
                DISCOVER,
            ),
            (
                br#"{"method":"initialize","method":"subscriptions/listen"}"#,
                Outcome::DuplicateMethod,
            ),
            (
                br#"{"method":"initialize","m\u0065thod":"x"}"#,
                Outcome::DuplicateMethod,
            ),
        ] {
            assert_eq!(outcome(body), expected, "{}", String::from_utf8_lossy(body));
            // As a last chunk, a plain rest decides at once; any other is scanned.
            let mut scanner = Scanner::new();
            assert_eq!(
                scanner.feed_last(body),
                Some(expected),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        // Two ids before the method, or one that is not a string or a scalar: none is taken.
        for ids in [
            &br#"{"id":1,"id":2,"method":"server/discover"}"#[..],
            br#"{"id":{"a":1},"method":"server/discover"}"#,
        ] {
            let mut scanner = Scanner::new();
            assert_eq!(scanner.feed(ids), Some(DISCOVER));
            assert_eq!(scanner.id(), None, "{}", String::from_utf8_lossy(ids));
        }
        // What the skim leaves to the grammar reads as the grammar reads it:
        // escaped keys and methods, non-string methods, bad syntax, a chunk that
        // ends too soon. No id is taken when the grammar read the method.
        for (other, expected) in [
            (&br#"{"id":1,"m\u0065thod":"tools/call"}"#[..], Some(OTHER)),
            (
                br#"{"id":1,"method":"subscriptions/\u006cisten"}"#,
                Some(LISTEN),
            ),
            (br#"{"id":1,"method":1}"#, Some(Outcome::NoMethod)),
            (br#"{"id":1,,"method":"x"}"#, Some(Outcome::Invalid)),
            (br#"{"id":"\x","method":"x"}"#, Some(Outcome::Invalid)),
            (br#"{"id":1,"method":"tools/ca"#, None),
            (br#"{"id":1,"params":{"a":"#, None),
            (br#"{"id":1}"#, Some(Outcome::NoMethod)),
            (br#"[{"method":"x"}]"#, Some(Outcome::Batch)),
        ] {
            let mut scanner = Scanner::new();
            assert_eq!(
                scanner.feed(other),
                expected,
                "{}",
                String::from_utf8_lossy(other)
            );
            assert_eq!(scanner.id(), None, "{}", String::from_utf8_lossy(other));
            assert_eq!(scan(other).0, expected.unwrap_or(Outcome::Invalid));
        }
    }

    #[test]
    fn method_only_counts_at_top_level() {
        let cases: [&[u8]; 6] = [
            br#"{"params":{"method":"initialize"},"id":1}"#,
            br#"{"x":"\"method\":\"initialize\"","id":1}"#,
            br#"{"x":"{\"method\":\"initialize\"}"}"#,
            br#"{"x":["method","initialize",{"method":"initialize"}]}"#,
            br#"{"x":[{"a":"}"},"]","method"],"y":{"method":{"method":[]}}}"#,
            br#"{"params":{"s":"}{][\\"}}"#,
        ];
        for body in cases {
            assert_eq!(
                scan(body),
                (Outcome::NoMethod, body.len()),
                "{}",
                String::from_utf8_lossy(body)
            );
            // The real method after such members is still found.
            let mut with = body[..body.len() - 1].to_vec();
            with.extend(br#","method":"subscriptions/listen"}"#);
            assert_eq!(outcome(&with), LISTEN, "{}", String::from_utf8_lossy(&with));
        }
    }

    #[test]
    fn near_miss_keys() {
        for key in [
            &br#""methods""#[..],
            br#""metho""#,
            br#""\"method""#,
            br#""method\u0000""#,
            br#""Method""#,
            br#""method ""#,
            br#""""#,
            br#""m""#,
        ] {
            let mut body = b"{".to_vec();
            body.extend(key);
            body.extend(br#":"initialize"}"#);
            assert_eq!(
                scan(&body),
                (Outcome::NoMethod, body.len()),
                "{}",
                String::from_utf8_lossy(&body)
            );
        }
    }

    #[test]
    fn non_string_method_is_no_method() {
        for value in [
            "1",
            "-2",
            "null",
            "true",
            "false",
            "{\"a\":1}",
            "[\"initialize\"]",
        ] {
            let body = format!("{{\"id\":1,\"method\": {value},\"x\":2}}");
            let at = body.find(": ").expect("colon") + 3;
            assert_eq!(scan(body.as_bytes()), (Outcome::NoMethod, at), "{body}");
        }
    }

    #[test]
    fn no_method() {
        for body in [
            &b"{}"[..],
            b" { } ",
            b"{\"id\":1}",
            b"{\"a\":{},\"b\":[],\"c\":\"\",\"d\":0}",
        ] {
            assert_eq!(
                scan(body),
                (
                    Outcome::NoMethod,
                    after(body, b"}", body.iter().filter(|&&b| b == b'}').count() - 1)
                )
            );
        }
    }

    #[test]
    fn batch() {
        assert_eq!(scan(br#"[{"method":"initialize"}]"#), (Outcome::Batch, 1));
        assert_eq!(scan(b" \n\t\r[ broken"), (Outcome::Batch, 5));
    }

    #[test]
    fn scalars_bom_and_empty_are_invalid() {
        for body in [
            &b"\"method\""[..],
            b"1",
            b"null",
            b"true",
            b"  x",
            b"\xEF\xBB\xBF{\"method\":\"initialize\"}",
            b"}",
            b"\x0c{}",
        ] {
            let at = body.iter().position(|&b| !is_ws(b)).expect("non-ws") + 1;
            assert_eq!(
                scan(body),
                (Outcome::Invalid, at),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        assert_eq!(scan(b""), (Outcome::Invalid, 0));
        assert_eq!(scan(b" \r\n\t "), (Outcome::Invalid, 5));
    }

    #[test]
    fn truncated_is_invalid() {
        for body in [
            &b"{"[..],
            br#"{"method""#,
            br#"{"method":"#,
            br#"{"method":"initialize""#,
            br#"{"method":"initialize","id":1"#,
            br#"{"method":"init"#,
            br#"{"method":"init\"#,
            br#"{"method":"\u00"#,
            br#"{"id":1,"#,
            br#"{"params":{"a":[1,2"#,
            br#"{"params":"abc\""#,
            br#"{"id":12"#,
        ] {
            assert_eq!(
                scan(body),
                (Outcome::Invalid, body.len()),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn syntax_errors_are_invalid() {
        for (body, at) in [
            (&br#"{method:"initialize"}"#[..], 2),
            (br#"{"method" "initialize"}"#, 11),
            (br#"{"a":1 "method":"initialize"}"#, 8),
            (br#"{"a":1"method":"initialize"}"#, 7),
            (br#"{"a":1,}"#, 8),
            (br#"{,}"#, 2),
            (br#"{"a":}"#, 6),
            (br#"{"method":}"#, 11),
            (br#"{"method":,"#, 11),
            (br#"{"\q":1}"#, 4),
            (br#"{"a":"\q"}"#, 8),
            (br#"{"\u00g0":1}"#, 7),
            (br#"{"method":"\x"}"#, 13),
            (br#"{"method":"\u12G4"}"#, 16),
            (br#"{"a":1}}"#, 7),
            (br#"{"a":"b"]"#, 9),
        ] {
            let got = scan(body);
            // `{"a":1}}`: the object is decided at its `}`; the stray byte is never read.
            let expected = if body == br#"{"a":1}}"# {
                Outcome::NoMethod
            } else {
                Outcome::Invalid
            };
            assert_eq!(got, (expected, at), "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn deep_nesting_does_not_recurse() {
        const DEPTH: usize = 100_000;
        let mut body = br#"{"params":"#.to_vec();
        for _ in 0..DEPTH / 2 {
            body.extend(br#"{"a":["#);
        }
        for _ in 0..DEPTH / 2 {
            body.extend(b"]}");
        }
        body.extend(br#","method":"initialize"}"#);
        assert_eq!(scan(&body), (INIT, body.len()));
    }

    #[test]
    fn escaped_backslash_before_quote_ends_the_string() {
        // `"a\\"` is the string `a\`: its quote ends it, so `method` is a real key.
        assert_eq!(outcome(br#"{"x":"a\\","method":"initialize"}"#), INIT);
        assert_eq!(
            outcome(br#"{"x":"\\\\\\","method":"server/discover"}"#),
            DISCOVER
        );
        // `\\\"` is a backslash then an escaped quote: the string goes on.
        assert_eq!(
            outcome(br#"{"x":"\\\",\"method\":\"initialize\"","id":1}"#),
            Outcome::NoMethod
        );
        assert_eq!(
            outcome(br#"{"p":{"x":"\\\"}\\"},"method":"subscriptions/listen"}"#),
            LISTEN
        );
        // The same inside keys.
        assert_eq!(outcome(br#"{"a\\":1,"method":"initialize"}"#), INIT);
        assert_eq!(outcome(br#"{"m\\":1,"method":"initialize"}"#), INIT);
    }

    #[test]
    fn backslash_runs_across_chunks() {
        // Every run length, so some chunking starts just after a backslash and ends
        // inside the same run; odd runs escape the quote, even ones do not.
        for run in 0..12 {
            let mut body = br#"{"a":"x"#.to_vec();
            body.extend(std::iter::repeat_n(b'\\', run));
            body.extend(br#"","method":"initialize"}"#);
            // An escaped quote makes `,` part of the string, and the next quote ends it;
            // the `m` after it is junk.
            let expected = if run % 2 == 0 {
                (INIT, body.len())
            } else {
                (Outcome::Invalid, after(&body, br#"",""#, 0) + 1)
            };
            assert_eq!(scan(&body), expected, "{}", String::from_utf8_lossy(&body));
            // The same inside a nested value.
            let mut nested = br#"{"a":["x"#.to_vec();
            nested.extend(std::iter::repeat_n(b'\\', run));
            nested.extend(br#"",1],"method":"initialize"}"#);
            assert_eq!(
                scan(&nested).0,
                expected.0,
                "{}",
                String::from_utf8_lossy(&nested)
            );
        }
    }

    #[test]
    fn many_escaped_quotes() {
        let mut body = br#"{"x":""#.to_vec();
        body.extend(std::iter::repeat_n(&br#"\""#[..], 10_000).flatten());
        body.extend(br#"","method":"subscriptions/listen"}"#);
        assert_eq!(scan(&body), (LISTEN, body.len()));
    }

    #[test]
    fn nothing_is_read_after_the_decision() {
        let mut scanner = Scanner::new();
        assert_eq!(scanner.feed(b"  "), None);
        assert_eq!(scanner.feed(br#"{"method":"x","#), Some(OTHER));
        assert_eq!(scanner.consumed(), 2 + br#"{"method":"x""#.len());
        assert_eq!(scanner.feed(b"\"id\":1}"), Some(OTHER));
        assert_eq!(scanner.consumed(), 2 + br#"{"method":"x""#.len());
        assert_eq!(scanner.finish(), OTHER);
        assert_eq!(Scanner::default().finish(), Outcome::Invalid);
    }

    #[test]
    fn agrees_with_serde_json() {
        let docs: &[&str] = &[
            r#"{}"#,
            r#"[]"#,
            r#"[1,2]"#,
            r#"{"method":"initialize"}"#,
            r#"{"method":"server/discover","id":1}"#,
            r#"{"id":1,"method":"subscriptions/listen"}"#,
            r#"{"method":"tools/list"}"#,
            r#"{"method":""}"#,
            r#"{"method":"Initialize"}"#,
            r#"{"method":"initialize "}"#,
            r#"{"method":null}"#,
            r#"{"method":42}"#,
            r#"{"method":-0.5e-3}"#,
            r#"{"method":false}"#,
            r#"{"method":{"method":"initialize"}}"#,
            r#"{"method":["initialize"]}"#,
            r#"{"params":{"method":"initialize"}}"#,
            r#"{"params":[{"method":"initialize"}],"id":null}"#,
            r#"{"jsonrpc":"2.0","id":"a\"b","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#,
            r#"{"\u006d\u0065\u0074\u0068\u006f\u0064":"\u0073erver\/discover"}"#,
            r#"{"method\u0000":"initialize"}"#,
            r#"{"methods":"initialize","metho":"server/discover"}"#,
            r#"{"x":"method","y":"initialize"}"#,
            r#"{"x":"\\","method":"initialize"}"#,
            r#"{"x":"\\\"method\\\":","method":"subscriptions/listen"}"#,
            r#"{"method":"\ud83d\ude00"}"#,
            r#"{"method":"caf\u00e9"}"#,
            r#"{"method":"é"}"#,
            r#"{"é":1,"method":"initialize"}"#,
            r#" { "id" : 1 , "method" : "initialize" } "#,
            "{\n\t\"method\"\r\n:\t\"server/discover\"\n}\n",
            r#"{"a":true,"b":false,"c":null,"d":1e10,"method":"initialize"}"#,
            r#"{"a":[[[[[]]]]],"b":{"c":{"d":{}}},"method":"subscriptions/listen"}"#,
            r#"{"a":"}","b":"]","c":"{[","method":"initialize"}"#,
            r#"{"a":{"b":"}\"}"},"method":"tools/call"}"#,
            r#"{"method":"subscriptions/listen","params":{"filter":{"method":"other"}}}"#,
            r#"{"id":1}"#,
            r#"{"":"","method":"server/discover"}"#,
            r#"{"method":"\/initialize"}"#,
            r#"{"method":"initialize\/"}"#,
        ];
        for doc in docs {
            let value: serde_json::Value = serde_json::from_str(doc).expect("valid test document");
            let expected = match &value {
                serde_json::Value::Array(_) => Outcome::Batch,
                serde_json::Value::Object(obj) => match obj.get("method") {
                    Some(serde_json::Value::String(name)) => {
                        Outcome::Method(Method::from_name(name.as_bytes()))
                    }
                    _ => Outcome::NoMethod,
                },
                _ => Outcome::Invalid,
            };
            assert_eq!(outcome(doc.as_bytes()), expected, "{doc}");
        }
    }

    /// A small deterministic generator (xorshift64*) for the randomized tests.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
        }

        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[self.below(items.len())]
        }

        fn ws(&mut self, out: &mut String) {
            if self.below(4) == 0 {
                out.push_str(self.pick(&[" ", "\n", "\t", "\r\n  "]));
            }
        }

        fn string(&mut self, out: &mut String) {
            out.push('"');
            for _ in 0..self.below(6) {
                out.push_str(self.pick(&[
                    "a",
                    "method",
                    "\\\"",
                    "\\\\",
                    "\\/",
                    "\\u0041",
                    "\\ud83d\\ude00",
                    "{",
                    "}",
                    "[",
                    "]",
                    ":",
                    ",",
                    "é",
                    "\\n",
                    " ",
                    "\\\"method\\\":",
                ]));
            }
            out.push('"');
        }

        fn value(&mut self, out: &mut String, depth: usize) {
            match self.below(if depth > 4 { 3 } else { 5 }) {
                0 => self.string(out),
                1 => out.push_str(self.pick(&["0", "-1", "2.5e3", "1E-2", "12345"])),
                2 => out.push_str(self.pick(&["true", "false", "null"])),
                3 => {
                    out.push('[');
                    for n in 0..self.below(4) {
                        if n > 0 {
                            out.push(',');
                        }
                        self.ws(out);
                        self.value(out, depth + 1);
                        self.ws(out);
                    }
                    out.push(']');
                }
                _ => {
                    out.push('{');
                    for n in 0..self.below(4) {
                        if n > 0 {
                            out.push(',');
                        }
                        self.ws(out);
                        self.string(out);
                        out.push(':');
                        self.ws(out);
                        self.value(out, depth + 1);
                    }
                    out.push('}');
                }
            }
        }

        /// A request-like document: mostly a top-level object whose keys (unique once
        /// decoded) often are or resemble `method`.
        fn document(&mut self) -> String {
            let mut out = String::new();
            self.ws(&mut out);
            if self.below(8) == 0 {
                self.value(&mut out, 0);
                return out;
            }
            out.push('{');
            let mut keys = Vec::new();
            for _ in 0..self.below(6) {
                let key = self.pick(&[
                    "method",
                    "\\u006dethod",
                    "m\\u0065thod",
                    "methods",
                    "metho",
                    "id",
                    "jsonrpc",
                    "params",
                    "\\\"method",
                    "",
                ]);
                let decoded: String = serde_json::from_str(&format!("\"{key}\"")).expect("key");
                if keys.contains(&decoded) {
                    continue;
                }
                if !keys.is_empty() {
                    out.push(',');
                }
                self.ws(&mut out);
                out.push_str(&format!("\"{key}\""));
                self.ws(&mut out);
                out.push(':');
                self.ws(&mut out);
                if decoded == "method" && self.below(4) != 0 {
                    out.push_str(self.pick(&[
                        "\"initialize\"",
                        "\"server/discover\"",
                        "\"subscriptions\\/listen\"",
                        "\"\\u0069nitialize\"",
                        "\"tools/call\"",
                        "\"\"",
                    ]));
                } else {
                    self.value(&mut out, 1);
                }
                self.ws(&mut out);
                keys.push(decoded);
            }
            out.push('}');
            self.ws(&mut out);
            out
        }
    }

    /// What serde_json says the outcome of a valid document without duplicate top-level
    /// keys is.
    fn serde_outcome(doc: &[u8]) -> Outcome {
        match serde_json::from_slice(doc) {
            Ok(serde_json::Value::Array(_)) => Outcome::Batch,
            Ok(serde_json::Value::Object(obj)) => match obj.get("method") {
                Some(serde_json::Value::String(name)) => {
                    Outcome::Method(Method::from_name(name.as_bytes()))
                }
                _ => Outcome::NoMethod,
            },
            _ => Outcome::Invalid,
        }
    }

    #[test]
    fn random_documents_agree_with_serde_json_and_themselves() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut seen = Vec::new();
        let (mut ids, mut lenient) = (0, 0);
        for _ in 0..300 {
            let doc = rng.document();
            let doc = doc.as_bytes();
            let (outcome, _) = scan(doc);
            assert_eq!(
                outcome,
                serde_outcome(doc),
                "{}",
                String::from_utf8_lossy(doc)
            );
            seen.push(outcome);
            // An id the one-pass path read is the document's id.
            let mut first = Scanner::new();
            first.feed(doc);
            if let Some(range) = first.id() {
                let value: serde_json::Value = serde_json::from_slice(doc).expect("valid");
                let id: serde_json::Value = serde_json::from_slice(&doc[range]).expect("an id");
                assert_eq!(value["id"], id, "{}", String::from_utf8_lossy(doc));
                ids += 1;
            }

            // As the body's last chunk, it is decided the same way, and so when
            // the body tells it ended only after it was left undecided.
            for whole in [false, true] {
                let mut last = scanner(whole);
                let outcome = last.feed_last(doc).unwrap_or_else(|| last.finish());
                assert_eq!(
                    outcome,
                    scan_mode(doc, whole).0,
                    "{}",
                    String::from_utf8_lossy(doc)
                );
                let mut late = scanner(whole);
                if late.feed(doc).is_none() {
                    let after = late.finish_after(doc);
                    assert_eq!(after, outcome, "{}", String::from_utf8_lossy(doc));
                }
            }

            // Broken copies: whatever the answer, every chunking must give the same one.
            let mut broken = doc.to_vec();
            let at = rng.below(broken.len());
            if rng.below(2) == 0 {
                broken.truncate(at);
            } else {
                let junk = b"\"\\{}[],: x\xff";
                broken[at] = junk[rng.below(junk.len())];
            }
            let (outcome, _) = scan(&broken);
            // As a last chunk, bad syntax after a plain rest may go unseen,
            // never a second method.
            let mut last = Scanner::new();
            let last = last.feed_last(&broken).unwrap_or_else(|| last.finish());
            // Left undecided until the end is told, it ends as a last chunk.
            let mut late = Scanner::new();
            if late.feed(&broken).is_none() {
                let after = late.finish_after(&broken);
                assert_eq!(after, last, "{}", String::from_utf8_lossy(&broken));
            }
            if last != outcome {
                assert_eq!(
                    outcome,
                    Outcome::Invalid,
                    "{}",
                    String::from_utf8_lossy(&broken)
                );
                assert!(matches!(last, Outcome::Method(_)));
                let rest = &broken[broken.windows(8).position(|w| w == b"\"method\"").unwrap()..];
                assert!(is_plain(&rest[8..]), "{}", String::from_utf8_lossy(&broken));
                lenient += 1;
            }
        }
        // Valid documents with unique keys reach every outcome but these two.
        for outcome in [
            INIT,
            DISCOVER,
            LISTEN,
            OTHER,
            Outcome::Batch,
            Outcome::NoMethod,
        ] {
            assert!(seen.contains(&outcome), "{outcome:?} never generated");
        }
        assert!(ids > 0, "no id read in one pass");
        assert!(lenient > 0, "no bad syntax left unseen");
    }

    #[test]
    fn ids_read_in_one_pass_are_the_documents() {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        let members = [
            r#""id":-1.5e3"#,
            r#""id" : "a\u0031""#,
            r#""id":"x y""#,
            r#""id":null"#,
            r#""id":7"#,
            r#""jsonrpc":"2.0""#,
            r#""params":{"id":3}"#,
            r#""ids":1"#,
        ];
        let (mut read, mut left) = (0, 0);
        for _ in 0..500 {
            let mut doc = String::from("{");
            for _ in 0..rng.below(4) {
                doc.push_str(members[rng.below(members.len())]);
                doc.push(',');
            }
            doc.push_str(r#""method":"server/discover""#);
            if rng.below(2) == 0 {
                doc.push_str(r#","id":9"#);
            }
            doc.push('}');
            let mut scanner = Scanner::new();
            assert_eq!(scanner.feed(doc.as_bytes()), Some(DISCOVER), "{doc}");
            let prefix = &doc[..doc.find(r#""method""#).unwrap()];
            // `"params":{"id":3}` holds the only nested id.
            let nested = prefix.matches(r#"{"id":3}"#).count();
            let single = prefix.matches(r#""id""#).count() - nested == 1;
            match scanner.id() {
                Some(range) => {
                    assert!(single, "{doc}");
                    let prefix: serde_json::Value =
                        serde_json::from_str(&format!("{}\"m\":1}}", prefix)).unwrap();
                    let id: serde_json::Value = serde_json::from_str(&doc[range]).unwrap();
                    assert_eq!(prefix["id"], id, "{doc}");
                    read += 1;
                }
                None => {
                    assert!(!single, "{doc}");
                    left += 1;
                }
            }
        }
        assert!(read > 50 && left > 50, "{read} read, {left} left");
    }

    #[test]
    fn whole_mode_finds_a_later_duplicate() {
        let long = format!(
            r#"{{"method":"{}","method":"subscriptions/listen"}}"#,
            "x".repeat(100)
        );
        for body in [
            r#"{"id":1,"method":"tools/call","params":{"method":"x"},"method":"subscriptions/listen"}"#,
            long.as_str(),
        ] {
            let mut scanner = Scanner::whole();
            assert_eq!(
                scanner.feed(body.as_bytes()),
                Some(Outcome::DuplicateMethod),
                "{body}"
            );
            assert_eq!(scanner.method(), Some(Method::Other));
        }
        for first in ["null", "5", "{\"a\":[1]}", "[\"x\"]", "true"] {
            let body = format!(r#"{{"method":{first},"method":"subscriptions/listen"}}"#);
            assert_eq!(
                Scanner::whole().feed(body.as_bytes()),
                Some(Outcome::DuplicateMethod),
                "{body}"
            );
            assert_eq!(
                Scanner::new().feed(body.as_bytes()),
                Some(Outcome::NoMethod),
                "{body}"
            );
        }
        let mut scanner = Scanner::whole();
        assert_eq!(scanner.feed(br#"{"method":"tools/call","#), None);
        assert_eq!(scanner.method(), Some(Method::Other));
        assert_eq!(
            scanner.feed(br#""params":{}}"#),
            Some(Outcome::Method(Method::Other))
        );
        assert_eq!(
            Scanner::new().feed(br#"{"method":"tools/call","#),
            Some(Outcome::Method(Method::Other))
        );
    }
}
