#!/usr/bin/env node
'use strict';
/*
 * rmqwire interop peer: the pure Node.js RocketMQ client ali-ons behind the same command line as
 * tools/peers/java/peer/Peer.java, printing one JSON object per line on stdout.
 *
 *   node peer.js produce --namesrv A --topic T --count N [--mode sync|async] [--tag X] [--keys K]
 *                [--prop k=v ...] [--body TEXT | --body-size B] [--compress] [--group G]
 *   node peer.js consume --namesrv A --topic T --count N [--mode push] [--model cluster|broadcast]
 *                [--group G] [--from first|last] [--timeout-ms M] [--sub EXPR]
 *
 * ali-ons has no batch, oneway, ordered, delay-level or transactional send, no orderly and no
 * pull consumer: those options exit with code 2. Exit codes: 0 ok, 2 error, 3 consume timeout.
 */

const crypto = require('crypto');
const { Producer, Consumer, Message } = require('ali-ons');

// stdout carries only our JSON lines; the client library's chatter goes to stderr.
const stdoutWrite = process.stdout.write.bind(process.stdout);
console.log = console.error;
console.info = console.error;

// ali-ons asserts an HTTP client exists, but only uses it to ask Aliyun's address server for
// name servers; with an explicit nameSrv it is never called.
const unusedHttpClient = {
  request() {
    throw new Error('the HTTP address server must not be used; pass --namesrv');
  },
};

class UsageError extends Error {}

function parseArgs(argv) {
  const o = { props: [], compress: false, orderly: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith('--')) throw new UsageError(`unexpected argument ${a}`);
    const name = a.slice(2);
    if (name === 'compress' || name === 'orderly') {
      o[name] = true;
      continue;
    }
    if (i + 1 >= argv.length) throw new UsageError(`missing value for ${a}`);
    const v = argv[++i];
    if (name === 'prop') {
      if (v.indexOf('=') <= 0) throw new UsageError(`--prop needs k=v, got ${v}`);
      o.props.push(v);
    } else {
      o[name] = v;
    }
  }
  return o;
}

function req(o, name) {
  if (o[name] === undefined) throw new UsageError(`--${name} is required`);
  return o[name];
}

function int(o, name, dflt) {
  if (o[name] === undefined) return dflt;
  const n = Number.parseInt(o[name], 10);
  if (Number.isNaN(n)) throw new UsageError(`--${name} needs an integer, got ${o[name]}`);
  return n;
}

function emit(obj) {
  stdoutWrite(JSON.stringify(obj) + '\n');
}

function sha256(buf) {
  return crypto.createHash('sha256').update(buf || Buffer.alloc(0)).digest('hex');
}

const subst = (s, i) => s.split('{i}').join(String(i));

// Same filler as the Java peer, so equal (size, index) gives byte-identical bodies across peers.
function patternBody(size, index) {
  const prefix = Buffer.from(`body-${index}-`, 'ascii');
  const b = Buffer.alloc(size);
  for (let j = 0; j < size; j++) {
    b[j] = j < prefix.length ? prefix[j] : 97 + (j * 7 + index) % 26;
  }
  return b;
}

function buildBody(o, i) {
  if (o.body !== undefined) return Buffer.from(subst(o.body, i), 'utf8');
  if (o['body-size'] !== undefined) return patternBody(int(o, 'body-size', 0), i);
  return Buffer.from(`hello-${i}`, 'utf8');
}

function buildMessage(o, topic, i) {
  const body = buildBody(o, i);
  const msg = new Message(topic, o.tag !== undefined ? subst(o.tag, i) : null, body);
  if (o.tag === undefined) {
    // Otherwise ali-ons would send the property TAGS with the literal value "null".
    delete msg.properties.TAGS;
  }
  if (o.keys !== undefined) msg.keys = [ subst(o.keys, i) ];
  for (const kv of o.props) {
    const eq = kv.indexOf('=');
    msg.properties[kv.slice(0, eq)] = subst(kv.slice(eq + 1), i);
  }
  return { msg, body };
}

const nowMs = start => Number((process.hrtime.bigint() - start) / 1000000n);

async function produce(o) {
  const namesrv = req(o, 'namesrv');
  const topic = req(o, 'topic');
  const count = int(o, 'count', 1);
  const mode = o.mode || 'sync';
  if (mode !== 'sync' && mode !== 'async') throw new UsageError(`ali-ons cannot produce in mode ${mode}`);
  const t0 = process.hrtime.bigint();
  const producer = new Producer({
    httpclient: unusedHttpClient,
    nameSrv: namesrv,
    clientIP: '127.0.0.1',
    producerGroup: o.group || `rmqwire_node_producer_${process.pid}`,
    // Without --compress keep bodies raw (the Java peer does the same).
    compressMsgBodyOverHowmuch: o.compress ? 4 * 1024 : Number.MAX_SAFE_INTEGER,
  });
  producer.on('error', err => console.error('producer error:', err));
  await producer.ready();
  emit({ event: 'started', startMs: nowMs(t0) });

  const sendOne = async i => {
    const { msg, body } = buildMessage(o, topic, i);
    const r = await producer.send(msg);
    emit({
      index: i,
      // ali-ons sets no UNIQ_KEY, so its message id is the broker's offset message id.
      msgId: r.msgId,
      offsetMsgId: r.msgId,
      queue: { topic: r.messageQueue.topic, brokerName: r.messageQueue.brokerName, queueId: Number(r.messageQueue.queueId) },
      queueOffset: r.queueOffset,
      status: r.sendStatus,
      topic,
      bodySha256: sha256(body),
      bodySize: body.length,
      tags: msg.tags || null,
      keys: msg.keys || null,
      properties: Object.assign({}, msg.properties),
    });
  };
  let failed = 0;
  if (mode === 'sync') {
    for (let i = 0; i < count; i++) await sendOne(i);
  } else {
    const results = await Promise.allSettled(Array.from({ length: count }, (_, i) => sendOne(i)));
    results.forEach((r, i) => {
      if (r.status === 'rejected') {
        failed++;
        emit({ event: 'send-failed', index: i, message: String(r.reason) });
      }
    });
  }
  await producer.close();
  emit({ event: 'done', elapsedMs: nowMs(t0) });
  return failed === 0 ? 0 : 2;
}

async function consume(o) {
  const namesrv = req(o, 'namesrv');
  const topic = req(o, 'topic');
  const count = int(o, 'count', 1);
  const timeoutMs = int(o, 'timeout-ms', 60000);
  const mode = o.mode || 'push';
  if (mode !== 'push') throw new UsageError(`ali-ons has no ${mode} consumer`);
  if (o.orderly) throw new UsageError('ali-ons has no orderly consumer');
  const model = o.model || 'cluster';
  if (model !== 'cluster' && model !== 'broadcast') throw new UsageError('--model must be cluster|broadcast');
  const from = o.from || 'first';
  if (from !== 'first' && from !== 'last') throw new UsageError('--from must be first|last');
  const group = o.group || `rmqwire_node_consumer_${process.pid}`;
  const t0 = process.hrtime.bigint();

  const consumer = new Consumer({
    httpclient: unusedHttpClient,
    nameSrv: namesrv,
    clientIP: '127.0.0.1',
    consumerGroup: group,
    isBroadcast: model === 'broadcast',
    consumeFromWhere: from === 'first' ? 'CONSUME_FROM_FIRST_OFFSET' : 'CONSUME_FROM_LAST_OFFSET',
    persistent: false,
  });
  consumer.on('error', err => console.error('consumer error:', err));

  let received = 0;
  let resolveDone;
  const done = new Promise(resolve => { resolveDone = resolve; });
  consumer.subscribe(topic, o.sub || '*', async msg => {
    const props = Object.assign({}, msg.properties);
    if (props.TAGS === null) delete props.TAGS;
    // ali-ons splits the stored property string on its trailing separator too, which leaves an
    // empty name with an empty value; that entry is a parsing artefact, not a property.
    delete props[''];
    const body = msg.body || Buffer.alloc(0);
    const text = printableUtf8(body);
    emit({
      msgId: props.UNIQ_KEY || msg.msgId,
      offsetMsgId: msg.msgId,
      topic: msg.topic,
      queue: { topic: msg.topic, brokerName: null, queueId: msg.queueId },
      queueOffset: msg.queueOffset,
      commitLogOffset: msg.commitLogOffset,
      bodySha256: sha256(body),
      bodySize: body.length,
      bodyEncoding: text !== null ? 'utf8' : 'base64',
      body: text !== null ? text : body.toString('base64'),
      tags: props.TAGS || null,
      keys: props.KEYS || null,
      properties: props,
      reconsumeTimes: msg.reconsumeTimes,
      bornHost: msg.bornHost,
      storeHost: msg.storeHost,
      bornTimestamp: msg.bornTimestamp,
      storeTimestamp: msg.storeTimestamp,
      sysFlag: msg.sysFlag,
      flag: msg.flag,
      storeSize: msg.storeSize,
    });
    received++;
    if (received >= count) resolveDone(true);
  });
  await consumer.ready();
  emit({ event: 'started', startMs: nowMs(t0), group });
  const timer = setTimeout(() => resolveDone(false), timeoutMs);
  const ok = await done;
  clearTimeout(timer);
  await consumer.close();
  emit({ event: ok ? 'done' : 'timeout', elapsedMs: nowMs(t0), received });
  return ok ? 0 : 3;
}

function printableUtf8(buf) {
  const s = buf.toString('utf8');
  if (!Buffer.from(s, 'utf8').equals(buf)) return null;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u0008\u000b\u000c\u000e-\u001f]/.test(s)) return null;
  return s;
}

async function main(argv) {
  const [ cmd, ...rest ] = argv;
  const o = parseArgs(rest);
  if (cmd === 'produce') return produce(o);
  if (cmd === 'consume') return consume(o);
  throw new UsageError('usage: peer.js produce|consume --namesrv A --topic T ...');
}

main(process.argv.slice(2)).then(
  rc => process.exit(rc),
  err => {
    if (err instanceof UsageError) {
      console.error(`peer: ${err.message}`);
    } else {
      console.error(err && err.stack || err);
      emit({ event: 'error', message: String(err && err.message || err) });
    }
    process.exit(2);
  }
);
