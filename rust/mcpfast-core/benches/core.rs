//! `cargo bench -p mcpfast-core`: the core's operations without Python in the way.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mcpfast_core::envelope::{decode_bytes, scan_reply};
use mcpfast_core::framer::LineFramer;
use mcpfast_core::sse::{encode_event, SseDecoder};
use mcpfast_core::{json, write};

const CALL: &[u8] = br#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello world"},"_meta":{"progressToken":42}}}"#;
const REPLY: &[u8] = br#"{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"hello world"}],"isError":false}}"#;

fn tools_list_reply() -> Vec<u8> {
    let mut s = String::from(r#"{"jsonrpc":"2.0","id":3,"result":{"tools":["#);
    for i in 0..100 {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!(
            r#"{{"name":"tool_{i}","title":"Tool {i}","description":"Does thing number {i} with care.","inputSchema":{{"type":"object","properties":{{"text":{{"type":"string"}},"count":{{"type":"integer","minimum":0}}}},"required":["text"]}}}}"#
        ));
    }
    s.push_str("]}}");
    s.into_bytes()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("envelope");
    g.throughput(Throughput::Bytes(CALL.len() as u64));
    g.bench_function("decode tools/call", |b| {
        b.iter(|| decode_bytes(black_box(CALL), 128).is_ok())
    });
    g.bench_function("scan_reply", |b| {
        b.iter(|| scan_reply(black_box(REPLY), 128).is_ok())
    });
    let list = tools_list_reply();
    g.throughput(Throughput::Bytes(list.len() as u64));
    g.bench_function("validate tools/list reply (100 tools)", |b| {
        b.iter(|| json::validate(black_box(&list), 128).is_ok())
    });
    g.finish();

    let mut g = c.benchmark_group("write");
    g.bench_function("write_str 40 chars", |b| {
        let mut out = Vec::with_capacity(64);
        b.iter(|| {
            out.clear();
            write::write_str(
                &mut out,
                black_box("hello world, with a \"quote\" and a tab\t"),
            );
        })
    });
    g.bench_function("write_f64", |b| {
        let mut out = Vec::with_capacity(32);
        b.iter(|| {
            out.clear();
            write::write_f64(&mut out, black_box(12_345.678_9));
        })
    });
    g.finish();

    let mut stream = Vec::new();
    for i in 0..1000 {
        let msg = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":1,"progress":{i},"total":1000}}}}"#
        );
        encode_event(
            &mut stream,
            msg.as_bytes(),
            Some(&i.to_string()),
            None,
            None,
        );
    }
    let mut lines = Vec::new();
    for _ in 0..1000 {
        lines.extend_from_slice(CALL);
        lines.push(b'\n');
    }
    let mut g = c.benchmark_group("streams");
    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.bench_function("sse decode 1000 events", |b| {
        b.iter(|| {
            let mut d = SseDecoder::new(1 << 22);
            let mut n = 0usize;
            for chunk in stream.chunks(4096) {
                d.feed(chunk, |_| n += 1);
            }
            n
        })
    });
    g.throughput(Throughput::Bytes(lines.len() as u64));
    g.bench_function("frame 1000 lines", |b| {
        b.iter(|| {
            let mut f = LineFramer::new(1 << 22);
            let mut n = 0usize;
            for chunk in lines.chunks(65536) {
                f.feed(chunk, |_| n += 1);
            }
            n
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
