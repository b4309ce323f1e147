//! Messages built octet by octet, so that a case can get any field wrong.

/// A path attribute: flags, type code, length (two octets when the flags say so), value.
pub fn attr(flags: u8, code: u8, value: &[u8]) -> Vec<u8> {
    let mut v = vec![flags, code];
    if flags & 0x10 != 0 {
        v.extend_from_slice(&(value.len() as u16).to_be_bytes());
    } else {
        v.push(value.len() as u8);
    }
    v.extend_from_slice(value);
    v
}

/// A message of this type around this body, its header's length right.
pub fn message(ty: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![0xff; 16];
    m.extend_from_slice(&((19 + body.len()) as u16).to_be_bytes());
    m.push(ty);
    m.extend_from_slice(body);
    m
}

/// An UPDATE from its three fields.
pub fn update(withdrawn: &[u8], attrs: &[Vec<u8>], nlri: &[u8]) -> Vec<u8> {
    let attrs = attrs.concat();
    let mut body = Vec::with_capacity(4 + withdrawn.len() + attrs.len() + nlri.len());
    body.extend_from_slice(&(withdrawn.len() as u16).to_be_bytes());
    body.extend_from_slice(withdrawn);
    body.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
    body.extend_from_slice(&attrs);
    body.extend_from_slice(nlri);
    message(2, &body)
}

pub fn origin(v: u8) -> Vec<u8> {
    attr(0x40, 1, &[v])
}

/// AS_PATH segments `(type, ASes)`, each AS in `N` octets; extended length when long.
fn as_path_of<T: Copy, const N: usize>(
    segments: &[(u8, Vec<T>)],
    octets: fn(T) -> [u8; N],
) -> Vec<u8> {
    let mut v = Vec::new();
    for (kind, asns) in segments {
        v.push(*kind);
        v.push(asns.len() as u8);
        for a in asns {
            v.extend_from_slice(&octets(*a));
        }
    }
    attr(if v.len() > 255 { 0x50 } else { 0x40 }, 2, &v)
}

/// AS_PATH segments of 4-octet ASes.
pub fn as_path4(segments: &[(u8, Vec<u32>)]) -> Vec<u8> {
    as_path_of(segments, u32::to_be_bytes)
}

/// AS_PATH segments of 2-octet ASes.
pub fn as_path2(segments: &[(u8, Vec<u16>)]) -> Vec<u8> {
    as_path_of(segments, u16::to_be_bytes)
}

/// One AS_SEQUENCE of these ASes, split into segments of 255 as RFC 4271 requires.
pub fn long_sequence(asns: &[u32]) -> Vec<u8> {
    let segments: Vec<(u8, Vec<u32>)> = asns.chunks(255).map(|c| (2, c.to_vec())).collect();
    as_path4(&segments)
}

pub fn next_hop(a: [u8; 4]) -> Vec<u8> {
    attr(0x40, 3, &a)
}

pub const NH6: [u8; 16] = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];

/// MP_REACH_NLRI (RFC 4760 section 3).
pub fn mp_reach(afi: u16, safi: u8, nh: &[u8], nlri: &[u8]) -> Vec<u8> {
    let mut v = afi.to_be_bytes().to_vec();
    v.push(safi);
    v.push(nh.len() as u8);
    v.extend_from_slice(nh);
    v.push(0);
    v.extend_from_slice(nlri);
    attr(0x90, 14, &v)
}

/// MP_UNREACH_NLRI (RFC 4760 section 4).
pub fn mp_unreach(afi: u16, safi: u8, nlri: &[u8]) -> Vec<u8> {
    let mut v = afi.to_be_bytes().to_vec();
    v.push(safi);
    v.extend_from_slice(nlri);
    attr(0x90, 15, &v)
}

/// An OPEN's body: version, My AS, hold time, BGP Identifier, optional parameters.
pub fn open_body(version: u8, my_as: u16, hold: u16, id: [u8; 4], params: &[u8]) -> Vec<u8> {
    let mut b = vec![version];
    b.extend_from_slice(&my_as.to_be_bytes());
    b.extend_from_slice(&hold.to_be_bytes());
    b.extend_from_slice(&id);
    b.push(params.len() as u8);
    b.extend_from_slice(params);
    b
}

/// A capability (RFC 5492): code, length, value.
pub fn cap(code: u8, value: &[u8]) -> Vec<u8> {
    let mut v = vec![code, value.len() as u8];
    v.extend_from_slice(value);
    v
}

/// An optional parameter of type 2 holding these capabilities.
pub fn caps_param(caps: &[Vec<u8>]) -> Vec<u8> {
    let c = caps.concat();
    let mut v = vec![2, c.len() as u8];
    v.extend_from_slice(&c);
    v
}

pub fn multiprotocol(afi: u16, safi: u8) -> Vec<u8> {
    let mut v = afi.to_be_bytes().to_vec();
    v.extend_from_slice(&[0, safi]);
    cap(1, &v)
}

pub fn four_octet_as(asn: u32) -> Vec<u8> {
    cap(65, &asn.to_be_bytes())
}
