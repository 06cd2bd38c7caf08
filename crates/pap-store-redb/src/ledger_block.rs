//! The event ledger's on-disk form: rows numbered by a sequence, stored in blocks of up to
//! [`BLOCK_ROWS`] consecutive rows, one redb value per block (keyed by its first row's
//! number).
//!
//! Why blocks: the ledger is written once per decision and read almost never (a duplicate's
//! reason, listings, the retention sweep). One B-tree insert per row cost a tenth of a
//! stream's time; one per block costs nothing measurable. Rows stay individually
//! addressable: a block starts with an offset table, so row `n` is found without decoding
//! its neighbours.
//!
//! Layout (little-endian): the rows, then `count + 1` offsets (`u32`, where each row starts,
//! and the end), then `count: u32` and `max_decided_at: i64`. A row: `decided_at: i64`,
//! `depth: u32`, then event id, trigger id, event type, outcome and invocation id (empty:
//! none), each as `len: u32` and UTF-8 bytes. (Format 6: `decided_at` as a zigzag varint,
//! `depth` and the lengths as varints, a known outcome as one byte, the invocation id packed,
//! see `id_codec`.) Rows come first so a block under construction
//! is read the same way (a duplicate within one transaction reads its original's row).

use super::{id_codec, varint};
use pap_domain::LedgerRow;

/// Rows per block: small enough that reading one row reads little, large enough that the
/// per-insert cost of redb vanishes.
pub(super) const BLOCK_ROWS: usize = 1024;

/// A block is also stored once its rows take this many bytes (event ids and types can be
/// long when `max_event_bytes` is raised): offsets are `u32`, and a block stays small.
pub(super) const BLOCK_BYTES: usize = 16 * 1024 * 1024;

const FOOTER: usize = 4 + 8;

/// Outcomes a row stores as one byte (1 for the first, …): nearly every row has one of them,
/// and a byte below 0x20 cannot be an outcome's text. Another outcome is kept as its text.
/// Append only: a code's meaning never changes.
const OUTCOMES: [&str; 7] = [
    "invoked",
    "queued",
    "duplicate",
    "cascade_rejected",
    "throttled",
    "awaiting_approval",
    "filtered",
];

/// A block is stored once it reaches this size: redb rounds a large value up to a power of
/// two of pages, so a block just over 64 KiB would take 128 KiB (at 1,024 rows of about 90
/// bytes, a third of the ledger was padding).
const ALLOCATION: usize = 64 * 1024 - 512;

/// A block being filled, rows appended in sequence order.
#[derive(Debug)]
pub(super) struct Builder {
    /// The sequence number of the first row.
    pub first: u64,
    rows: Vec<u8>,
    offsets: Vec<u32>,
    max_decided_at: i64,
}

impl Builder {
    pub(super) fn new(first: u64) -> Builder {
        Builder {
            first,
            rows: Vec::with_capacity(BLOCK_ROWS * 160),
            offsets: Vec::with_capacity(BLOCK_ROWS + 1),
            max_decided_at: i64::MIN,
        }
    }

    /// Starts over at row `first`, keeping the buffers (a stream fills one block after
    /// another; fresh buffers each time cost more than the rows).
    pub(super) fn reset(&mut self, first: u64) {
        self.first = first;
        self.rows.clear();
        self.offsets.clear();
        self.max_decided_at = i64::MIN;
    }

    pub(super) fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Appends a row; refused (the block unchanged) if its offsets would no longer fit in
    /// `u32`, which only a row of gigabytes can cause.
    pub(super) fn push(&mut self, row: pap_storage::RowRef) -> Result<(), Malformed> {
        let invocation = row.invocation_id.map(id_codec::pack).unwrap_or_default();
        let code;
        let outcome = match OUTCOMES.iter().position(|o| *o == row.outcome) {
            Some(i) => {
                code = [i as u8 + 1];
                &code[..]
            }
            None => row.outcome.as_bytes(),
        };
        let fields: [&[u8]; 5] = [
            row.event_id.as_bytes(),
            row.trigger.as_bytes(),
            row.kind.as_bytes(),
            outcome,
            &invocation,
        ];
        let size = 20
            + fields
                .iter()
                .map(|t| varint::len(t.len() as u64) + t.len())
                .sum::<usize>();
        let start = u32::try_from(self.rows.len()).map_err(|_| Malformed)?;
        u32::try_from(self.rows.len() + size + (self.offsets.len() + 2) * 4 + FOOTER)
            .map_err(|_| Malformed)?;
        self.offsets.push(start);
        varint::put_signed(&mut self.rows, row.decided_at);
        varint::put(&mut self.rows, u64::from(row.depth));
        for field in fields {
            varint::put(&mut self.rows, field.len() as u64);
            self.rows.extend_from_slice(field);
        }
        self.max_decided_at = self.max_decided_at.max(row.decided_at);
        Ok(())
    }

    /// Whether the block should be stored now.
    pub(super) fn is_full(&self) -> bool {
        let stored = self.rows.len() + (self.offsets.len() + 1) * 4 + FOOTER;
        self.offsets.len() >= BLOCK_ROWS
            || self.rows.len() >= BLOCK_BYTES
            || (stored + self.rows.len() / self.offsets.len().max(1) >= ALLOCATION)
    }

    /// Row `index` of this block (0-based), before it is stored.
    pub(super) fn row(&self, index: usize) -> Result<LedgerRow, Malformed> {
        let start = *self.offsets.get(index).ok_or(Malformed)? as usize;
        let end = self
            .offsets
            .get(index + 1)
            .map_or(self.rows.len(), |e| *e as usize);
        decode_row(&self.rows[start..end])
    }

    /// The block's bytes, ready to store: the rows followed by the offsets and footer. The
    /// builder is spent until [`Builder::reset`].
    pub(super) fn finish(&mut self) -> &[u8] {
        let count = self.offsets.len() as u32;
        self.offsets.push(self.rows.len() as u32);
        self.rows.reserve(self.offsets.len() * 4 + FOOTER);
        for o in &self.offsets {
            self.rows.extend_from_slice(&o.to_le_bytes());
        }
        self.rows.extend_from_slice(&count.to_le_bytes());
        self.rows
            .extend_from_slice(&self.max_decided_at.to_le_bytes());
        &self.rows
    }
}

/// A stored block, read in place.
pub(super) struct Block<'a> {
    rows: &'a [u8],
    offsets: &'a [u8],
    max_decided_at: i64,
}

/// A block whose bytes do not follow the layout (a damaged file).
#[derive(Debug)]
pub(super) struct Malformed;

impl<'a> Block<'a> {
    pub(super) fn new(bytes: &'a [u8]) -> Result<Block<'a>, Malformed> {
        let footer = bytes.len().checked_sub(FOOTER).ok_or(Malformed)?;
        let count = u32::from_le_bytes(bytes[footer..footer + 4].try_into().expect("4 bytes"));
        let max_decided_at = i64::from_le_bytes(bytes[footer + 4..].try_into().expect("8 bytes"));
        let table = (count as usize + 1)
            .checked_mul(4)
            .filter(|t| *t <= footer)
            .ok_or(Malformed)?;
        Ok(Block {
            rows: &bytes[..footer - table],
            offsets: &bytes[footer - table..footer],
            max_decided_at,
        })
    }

    pub(super) fn len(&self) -> usize {
        self.offsets.len() / 4 - 1
    }

    /// The latest decision time in the block: the retention sweep drops a block whole.
    pub(super) fn max_decided_at(&self) -> i64 {
        self.max_decided_at
    }

    /// Row `index` (0-based within the block).
    pub(super) fn row(&self, index: usize) -> Result<LedgerRow, Malformed> {
        if index >= self.len() {
            return Err(Malformed);
        }
        let offset = |i: usize| {
            u32::from_le_bytes(self.offsets[i * 4..i * 4 + 4].try_into().expect("4 bytes")) as usize
        };
        let bytes = self
            .rows
            .get(offset(index)..offset(index + 1))
            .ok_or(Malformed)?;
        decode_row(bytes)
    }

    pub(super) fn rows(&self) -> impl Iterator<Item = Result<LedgerRow, Malformed>> + '_ {
        (0..self.len()).map(|i| self.row(i))
    }
}

fn decode_row(bytes: &[u8]) -> Result<LedgerRow, Malformed> {
    let mut row = Reader { bytes };
    let decided_at = varint::take_signed(&mut row.bytes).ok_or(Malformed)?;
    let depth = varint::take(&mut row.bytes)
        .and_then(|d| u32::try_from(d).ok())
        .ok_or(Malformed)?;
    let event_id = row.text()?;
    let trigger = row.text()?;
    let kind = row.text()?;
    let outcome = match row.field()? {
        [code] if usize::from(*code).wrapping_sub(1) < OUTCOMES.len() => {
            OUTCOMES[usize::from(*code) - 1].to_owned()
        }
        text => String::from_utf8(text.to_vec()).map_err(|_| Malformed)?,
    };
    let invocation = row.field()?;
    let invocation_id = if invocation.is_empty() {
        None
    } else {
        Some(id_codec::unpack(invocation).ok_or(Malformed)?)
    };
    Ok(LedgerRow {
        event_id,
        trigger,
        kind,
        depth,
        outcome,
        invocation_id,
        decided_at,
    })
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], Malformed> {
        if self.bytes.len() < n {
            return Err(Malformed);
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn field(&mut self) -> Result<&[u8], Malformed> {
        let len = varint::take(&mut self.bytes)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or(Malformed)?;
        self.take(len)
    }

    fn text(&mut self) -> Result<String, Malformed> {
        let len = varint::take(&mut self.bytes)
            .and_then(|l| usize::try_from(l).ok())
            .ok_or(Malformed)?;
        String::from_utf8(self.take(len)?.to_vec()).map_err(|_| Malformed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(i: usize) -> LedgerRow {
        LedgerRow {
            event_id: format!("evt-{i}"),
            trigger: "tø".into(),
            kind: "a.b.c".into(),
            depth: i as u32 % 4,
            // Coded outcomes, and one kept as text.
            outcome: match i % 3 {
                0 => "invoked",
                1 => "throttled",
                _ => "some_future_outcome",
            }
            .into(),
            // Ids packed as hex, and others kept as text.
            invocation_id: i.is_multiple_of(2).then(|| match i % 4 {
                0 => format!("inv_{i:032x}"),
                _ => format!("inv_{i}"),
            }),
            decided_at: 1_000 + i as i64,
        }
    }

    fn encode(rows: &[LedgerRow]) -> Vec<u8> {
        let mut b = Builder::new(0);
        for r in rows {
            b.push(r.into()).unwrap();
        }
        b.finish().to_vec()
    }

    #[test]
    fn rows_round_trip_and_are_found_by_index() {
        let rows: Vec<LedgerRow> = (0..50).map(row).collect();
        let mut builder = Builder::new(7);
        for r in &rows {
            builder.push(r.into()).unwrap();
        }
        assert_eq!(
            builder.row(17).unwrap(),
            rows[17],
            "readable before it is stored"
        );
        assert_eq!(builder.row(49).unwrap(), rows[49]);
        let bytes = builder.finish().to_vec();
        let block = Block::new(&bytes).unwrap();
        assert_eq!(block.len(), 50);
        assert_eq!(block.max_decided_at(), 1_049);
        assert_eq!(block.row(17).unwrap(), rows[17]);
        let all: Vec<LedgerRow> = block.rows().map(Result::unwrap).collect();
        assert_eq!(all, rows);
        assert!(block.row(50).is_err());
        builder.reset(100);
        builder.push((&rows[3]).into()).unwrap();
        let again = Block::new(builder.finish()).unwrap();
        assert_eq!((again.len(), again.row(0).unwrap()), (1, rows[3].clone()));
    }

    #[test]
    fn damaged_bytes_are_an_error_not_a_panic() {
        let bytes = encode(&[row(1), row(2)]);
        assert!(Block::new(&bytes[..5]).is_err());
        let mut lying = bytes.clone();
        let at = lying.len() - FOOTER;
        lying[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Block::new(&lying).is_err());
        let mut short_row = bytes.clone();
        // The second row's end offset now points past the rows: reading it fails cleanly.
        let end = short_row.len() - FOOTER - 4;
        short_row[end..end + 4].copy_from_slice(&9_999u32.to_le_bytes());
        let block = Block::new(&short_row).unwrap();
        assert_eq!(block.row(0).unwrap(), row(1));
        assert!(block.row(1).is_err());
        assert_eq!(Block::new(&encode(&[])).unwrap().len(), 0);
    }
}
