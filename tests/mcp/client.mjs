// SPDX-License-Identifier: MIT
// Drives sandloom's MCP server with the official MCP TypeScript SDK client, over the
// streamable HTTP transport or the stdio bridge (`sandloom mcp`), and checks every tool end to
// end plus the error cases. Run by tests/integration/test_mcp.py against the real daemon:
//
//   node client.mjs --transport http  --url URL --token TOKEN [--path /mcp]
//   node client.mjs --transport stdio --url URL --token TOKEN --binary build/sandloom
//
// Pass the daemon's SANDBOX_MCP_EXEC_WAIT_SECONDS as --exec-wait (default 4; keep it short: a
// long-command check waits that long). Prints one line per check ("ok NAME" / "FAIL NAME: why"), then a JSON summary line;
// exits 1 if any check failed.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';

const { values: opt } = parseArgs({
    options: {
        transport: { type: 'string' },
        url: { type: 'string' },
        token: { type: 'string' },
        path: { type: 'string', default: '/mcp' },
        binary: { type: 'string' },
        'exec-wait': { type: 'string', default: '4' },
    },
});

// The catalogue as the issue and Sandloom define it: name -> [readOnly, destructive, idempotent].
const EXPECTED_TOOLS = {
    sandbox_profile: [true, false, true],
    sandbox_resolve: [false, false, true],
    sandbox_create: [false, false, true],
    sandbox_status: [true, false, true],
    sandbox_audit_get: [true, false, true],
    sandbox_exec: [false, true, true],
    sandbox_exec_status: [true, false, true],
    sandbox_cancel: [false, true, true],
    sandbox_write_file: [false, true, true],
    sandbox_read_file: [true, false, true],
    sandbox_release: [false, true, true],
    sandbox_list_files: [true, false, true],
    sandbox_mkdir: [false, false, true],
    sandbox_delete_file: [false, true, true],
    sandbox_move_file: [false, true, false],
};

const results = { transport: opt.transport, passed: [], failed: [] };

async function check(name, fn) {
    try {
        await fn();
        results.passed.push(name);
        console.log(`ok ${name}`);
    } catch (e) {
        results.failed.push({ name, error: String(e && e.stack ? e.stack : e) });
        console.log(`FAIL ${name}: ${e && e.message ? e.message : e}`);
    }
}

function transport() {
    if (opt.transport === 'http') {
        return new StreamableHTTPClientTransport(new URL(opt.path, opt.url), {
            requestInit: { headers: { Authorization: `Bearer ${opt.token}` } },
        });
    }
    if (opt.transport === 'stdio') {
        // A clean environment: the bridge must get everything from its flags.
        return new StdioClientTransport({
            command: opt.binary,
            args: ['mcp', '--url', opt.url, '--token', opt.token],
            env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
            stderr: 'pipe',
        });
    }
    throw new Error(`--transport must be http or stdio, not ${opt.transport}`);
}

// Calls a tool that must succeed: structuredContent and the text content carry the same record.
async function ok(client, name, args) {
    const res = await client.callTool({ name, arguments: args });
    assert.notEqual(res.isError, true, `${name} failed: ${JSON.stringify(res.content)}`);
    assert.equal(res.content.length, 1);
    assert.equal(res.content[0].type, 'text');
    assert.deepEqual(JSON.parse(res.content[0].text), res.structuredContent, `${name}: text and structuredContent differ`);
    return res.structuredContent;
}

// Calls a tool that must fail as a tool result (isError) naming CODE.
async function toolError(client, name, args, code) {
    const res = await client.callTool({ name, arguments: args });
    assert.equal(res.isError, true, `${name} should have failed with ${code}: ${JSON.stringify(res)}`);
    assert.equal(res.structuredContent, undefined, 'an error result carries no structuredContent');
    const text = res.content.map((c) => c.text).join('\n');
    assert.ok(text.startsWith(`${code}: `), `${name}: expected ${code}, got ${text}`);
    return text;
}

const b64 = (s) => Buffer.from(s).toString('base64');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
    const client = new Client({ name: 'sandloom-mcp-test', version: '1.0.0' });
    const t = transport();
    let stderr = '';
    if (opt.transport === 'stdio') t.stderr?.on('data', (d) => { stderr += d; });

    await check('initialize', async () => {
        await client.connect(t);
        const info = client.getServerVersion();
        assert.equal(info.name, 'sandloom');
        assert.ok(client.getServerCapabilities().tools, 'the tools capability is declared');
        assert.match(client.getInstructions() ?? '', /sandbox_resolve/);
        // The SDK offers its newest revision; we speak it, so that is what was negotiated.
        if (opt.transport === 'http') assert.equal(t.protocolVersion, LATEST_PROTOCOL_VERSION);
    });

    await check('ping', async () => {
        assert.deepEqual(await client.ping(), {});
    });

    await check('tools/list', async () => {
        const { tools } = await client.listTools();
        assert.deepEqual(tools.map((x) => x.name).sort(), Object.keys(EXPECTED_TOOLS).sort());
        for (const tool of tools) {
            const [ro, destructive, idem] = EXPECTED_TOOLS[tool.name];
            const a = tool.annotations;
            assert.equal(a.readOnlyHint, ro, `${tool.name} readOnlyHint`);
            assert.equal(a.destructiveHint, destructive, `${tool.name} destructiveHint`);
            assert.equal(a.idempotentHint, idem, `${tool.name} idempotentHint`);
            assert.equal(a.openWorldHint, false, `${tool.name} openWorldHint`);
            assert.ok(tool.description.length > 60, `${tool.name} has a description an LLM can act on`);
            assert.ok(tool.title, `${tool.name} has a title`);
            assert.equal(tool.inputSchema.type, 'object');
            assert.equal(tool.outputSchema?.type, 'object', `${tool.name} has an outputSchema`);
            for (const [p, s] of Object.entries(tool.inputSchema.properties ?? {}))
                assert.ok(s.description, `${tool.name}.${p} is described`);
        }
        const exec = tools.find((x) => x.name === 'sandbox_exec');
        assert.deepEqual([...exec.inputSchema.required].sort(), ['argv', 'exec_id', 'generation', 'sandbox_id']);
    });

    const id = `mcp-${opt.transport}-${randomBytes(5).toString('hex')}`;
    const scope = `scope-${randomBytes(4).toString('hex')}`;
    let gen;

    await check('sandbox_profile', async () => {
        const p = await ok(client, 'sandbox_profile', {});
        assert.match(p.profile_hash, /^sha256:[0-9a-f]{64}$/);
        assert.equal(p.healthy, true);
        assert.equal(p.transport, 'streamable-http');
        assert.equal(typeof p.worker_id, 'string');
    });

    await check('sandbox_resolve', async () => {
        const r = await ok(client, 'sandbox_resolve', { sandbox_id: id, workspace_scope_id: scope });
        assert.equal(r.sandbox_id, id);
        assert.equal(r.status, 'ASSIGNED');
        assert.ok(Number.isInteger(r.generation));
        assert.equal(r.storage_mode, 'local');
        assert.match(r.profile_hash, /^sha256:/);
        gen = r.generation;
        const again = await ok(client, 'sandbox_resolve', { sandbox_id: id, workspace_scope_id: scope });
        assert.equal(again.generation, gen, 'resolve is idempotent');
    });

    await check('sandbox_create', async () => {
        const r = await ok(client, 'sandbox_create', { sandbox_id: id, generation: gen });
        assert.equal(r.sandbox_id, id);
        assert.equal(r.generation, gen);
        assert.equal(r.status, 'READY');
        assert.equal((await ok(client, 'sandbox_create', { sandbox_id: id, generation: gen })).status, 'READY');
    });

    await check('sandbox_status', async () => {
        const r = await ok(client, 'sandbox_status', { sandbox_id: id });
        assert.equal(r.status, 'READY');
        assert.equal(r.generation, gen);
        assert.equal(r.workspace_scope_id, scope);
    });

    await check('sandbox_write_file', async () => {
        const w = await ok(client, 'sandbox_write_file',
            { sandbox_id: id, generation: gen, path: 'hello.txt', content: 'hello, sandbox\n' });
        assert.deepEqual({ sandbox_id: w.sandbox_id, generation: w.generation, status: w.status },
            { sandbox_id: id, generation: gen, status: 'WRITTEN' });
        const bin = await ok(client, 'sandbox_write_file', {
            sandbox_id: id, generation: gen, path: '/workspace/data/blob.bin', make_parents: true,
            content_base64: Buffer.from([0, 255, 254, 1, 10]).toString('base64'),
        });
        assert.equal(bin.status, 'WRITTEN');
        assert.equal(bin.size_bytes, 5);
    });

    await check('sandbox_read_file', async () => {
        const r = await ok(client, 'sandbox_read_file', { sandbox_id: id, generation: gen, path: 'hello.txt' });
        assert.equal(r.path, '/workspace/hello.txt');
        assert.equal(r.content, 'hello, sandbox\n');
        assert.equal(r.content_base64, b64('hello, sandbox\n'));
        const bin = await ok(client, 'sandbox_read_file', { sandbox_id: id, generation: gen, path: 'data/blob.bin' });
        assert.equal(bin.content, null, 'not UTF-8: no text');
        assert.deepEqual([...Buffer.from(bin.content_base64, 'base64')], [0, 255, 254, 1, 10]);
    });

    await check('sandbox_mkdir', async () => {
        const r = await ok(client, 'sandbox_mkdir', { sandbox_id: id, generation: gen, path: 'src/lib', parents: true });
        assert.equal(r.status, 'ok');
        assert.equal(r.path, '/workspace/src/lib');
        await toolError(client, 'sandbox_mkdir', { sandbox_id: id, generation: gen, path: 'src/lib' }, 'SANDBOX_FILE_EXISTS');
    });

    await check('sandbox_move_file', async () => {
        const r = await ok(client, 'sandbox_move_file',
            { sandbox_id: id, generation: gen, source: 'hello.txt', destination: 'src/hello.txt' });
        assert.equal(r.source, '/workspace/hello.txt');
        assert.equal(r.destination, '/workspace/src/hello.txt');
        await toolError(client, 'sandbox_move_file',
            { sandbox_id: id, generation: gen, source: 'hello.txt', destination: 'x.txt' }, 'SANDBOX_FILE_NOT_FOUND');
    });

    await check('sandbox_list_files', async () => {
        const r = await ok(client, 'sandbox_list_files', { sandbox_id: id, generation: gen });
        assert.equal(r.path, '/workspace');
        assert.deepEqual(r.entries.map((e) => [e.name, e.type]), [['data', 'directory'], ['src', 'directory']]);
        const src = await ok(client, 'sandbox_list_files', { sandbox_id: id, generation: gen, path: 'src' });
        assert.deepEqual(src.entries.map((e) => e.name), ['hello.txt', 'lib']);
        assert.equal(src.entries[0].size_bytes, 15);
        const page = await ok(client, 'sandbox_list_files', { sandbox_id: id, generation: gen, path: 'src', limit: 1, offset: 1 });
        assert.deepEqual(page.entries.map((e) => e.name), ['lib']);
        assert.equal(page.total, 2);
    });

    await check('sandbox_exec', async () => {
        const args = {
            sandbox_id: id, generation: gen, exec_id: 'exec-1',
            argv: ['sh', '-c', 'cat src/hello.txt; echo run >> runs.log; echo "$GREETING" >&2; exit 3'],
            env: { GREETING: 'hi from env' },
        };
        const r = await ok(client, 'sandbox_exec', args);
        assert.equal(r.exec_id, 'exec-1');
        assert.equal(r.status, 'FAILED');
        assert.equal(r.exit_code, 3);
        assert.equal(r.stdout, 'hello, sandbox\n');
        assert.equal(r.stderr, 'hi from env\n');
        // The same exec_id again: the stored record, and the command did not run twice.
        const again = await ok(client, 'sandbox_exec', args);
        assert.equal(again.exit_code, 3);
        assert.equal(again.started_at, r.started_at);
        const log = await ok(client, 'sandbox_read_file', { sandbox_id: id, generation: gen, path: 'runs.log' });
        assert.equal(log.content, 'run\n');
        // cwd and stdin.
        const c = await ok(client, 'sandbox_exec', {
            sandbox_id: id, generation: gen, exec_id: 'exec-2', argv: ['sh', '-c', 'pwd; cat'], cwd: 'src', stdin: 'from stdin',
        });
        assert.equal(c.status, 'SUCCEEDED');
        assert.equal(c.stdout, '/workspace/src\nfrom stdin');
        await toolError(client, 'sandbox_exec',
            { sandbox_id: id, generation: gen, exec_id: 'exec-1', argv: ['true'] }, 'EXEC_ID_CONFLICT');
    });

    await check('sandbox_exec_status', async () => {
        const r = await ok(client, 'sandbox_exec_status', { sandbox_id: id, generation: gen, exec_id: 'exec-1' });
        assert.equal(r.status, 'FAILED');
        assert.equal(r.exit_code, 3);
        await toolError(client, 'sandbox_exec_status',
            { sandbox_id: id, generation: gen, exec_id: 'no-such-exec' }, 'EXEC_NOT_FOUND');
    });

    await check('long command: RUNNING, then polled to the end', async () => {
        // The daemon waits SANDBOX_MCP_EXEC_WAIT_SECONDS before answering RUNNING.
        const wait = Number(opt['exec-wait']);
        const t0 = Date.now();
        const r = await ok(client, 'sandbox_exec', {
            sandbox_id: id, generation: gen, exec_id: 'slow-1',
            argv: ['sh', '-c', `echo started; sleep ${wait + 4}; echo finished`],
        });
        const waited = Date.now() - t0;
        assert.equal(r.status, 'RUNNING');
        assert.equal(r.exit_code, null);
        // It waited rather than answering at once, and answered before the command's end.
        assert.ok(waited >= (wait - 0.5) * 1000, `answered after ${waited} ms`);
        let s = r;
        const deadline = Date.now() + 30000;
        while (s.status === 'RUNNING' && Date.now() < deadline)
            s = await ok(client, 'sandbox_exec_status', { sandbox_id: id, generation: gen, exec_id: 'slow-1', wait_seconds: 30 });
        assert.equal(s.status, 'SUCCEEDED');
        assert.equal(s.stdout, 'started\nfinished\n');
    });

    await check('sandbox_cancel', async () => {
        const r = await ok(client, 'sandbox_exec', {
            sandbox_id: id, generation: gen, exec_id: 'bg-1', argv: ['sleep', '60'], background: true, exec_scope: 'bg',
        });
        assert.equal(r.status, 'RUNNING');
        assert.equal(r.background, true);
        assert.equal(r.exec_scope, 'bg');
        const c = await ok(client, 'sandbox_cancel', { sandbox_id: id, generation: gen, exec_id: 'bg-1' });
        assert.deepEqual(c, { exec_id: 'bg-1', cancelled: true });
        let s = await ok(client, 'sandbox_exec_status', { sandbox_id: id, generation: gen, exec_id: 'bg-1', wait_seconds: 2 });
        for (let i = 0; s.status === 'RUNNING' && i < 10; i++)
            s = await ok(client, 'sandbox_exec_status', { sandbox_id: id, generation: gen, exec_id: 'bg-1', wait_seconds: 2 });
        assert.equal(s.status, 'CANCELLED');
        const again = await ok(client, 'sandbox_cancel', { sandbox_id: id, generation: gen, exec_id: 'bg-1' });
        assert.equal(again.cancelled, false);
    });

    await check('sandbox_delete_file', async () => {
        await toolError(client, 'sandbox_delete_file', { sandbox_id: id, generation: gen, path: 'src' },
            'SANDBOX_DIRECTORY_NOT_EMPTY');
        const r = await ok(client, 'sandbox_delete_file', { sandbox_id: id, generation: gen, path: 'src', recursive: true });
        assert.equal(r.path, '/workspace/src');
        await toolError(client, 'sandbox_delete_file', { sandbox_id: id, generation: gen, path: '/workspace' },
            'SANDBOX_PATH_IS_ROOT');
        const l = await ok(client, 'sandbox_list_files', { sandbox_id: id, generation: gen });
        assert.ok(!l.entries.some((e) => e.name === 'src'));
    });

    await check('sandbox_audit_get', async () => {
        const a = await ok(client, 'sandbox_audit_get', { sandbox_id: id });
        assert.equal(a.sandbox_id, id);
        assert.equal(a.status, 'READY');
        assert.deepEqual(a.events.map((e) => e.event).slice(0, 2), ['created', 'connected']);
    });

    await check('error: stale generation', async () => {
        await toolError(client, 'sandbox_write_file',
            { sandbox_id: id, generation: gen + 7, path: 'x.txt', content: 'x' }, 'STALE_SANDBOX_GENERATION');
        await toolError(client, 'sandbox_exec',
            { sandbox_id: id, generation: gen + 7, exec_id: 'stale', argv: ['true'] }, 'STALE_SANDBOX_GENERATION');
        await toolError(client, 'sandbox_create', { sandbox_id: id, generation: gen + 7 }, 'STALE_SANDBOX_ROUTE');
    });

    await check('error: unknown sandbox', async () => {
        const ghost = `ghost-${randomBytes(5).toString('hex')}`;
        await toolError(client, 'sandbox_status', { sandbox_id: ghost }, 'SANDBOX_NOT_FOUND');
        await toolError(client, 'sandbox_read_file', { sandbox_id: ghost, generation: 1, path: 'a' }, 'SANDBOX_NOT_FOUND');
        await toolError(client, 'sandbox_exec',
            { sandbox_id: ghost, generation: 1, exec_id: 'e', argv: ['true'] }, 'SANDBOX_NOT_FOUND');
        // Releasing is idempotent: RELEASED for an id that never existed.
        assert.deepEqual(await ok(client, 'sandbox_release', { sandbox_id: ghost }), { sandbox_id: ghost, status: 'RELEASED' });
    });

    await check('error: bad path', async () => {
        await toolError(client, 'sandbox_read_file', { sandbox_id: id, generation: gen, path: '/etc/passwd' },
            'SANDBOX_PATH_OUTSIDE_WORKSPACE');
        await toolError(client, 'sandbox_write_file',
            { sandbox_id: id, generation: gen, path: '../../etc/evil', content: 'x' }, 'SANDBOX_PATH_OUTSIDE_WORKSPACE');
        await toolError(client, 'sandbox_read_file', { sandbox_id: id, generation: gen, path: 'missing.txt' },
            'SANDBOX_FILE_NOT_FOUND');
        await toolError(client, 'sandbox_exec',
            { sandbox_id: id, generation: gen, exec_id: 'cwd-out', argv: ['true'], cwd: '/etc' }, 'SANDBOX_INVALID_CWD');
    });

    await check('error: invalid params', async () => {
        // Revision 2025-11-25: invalid arguments are tool errors the model can correct.
        let text = await toolError(client, 'sandbox_exec', { sandbox_id: id, generation: gen, exec_id: 'x' },
            'SANDBOX_INVALID_REQUEST');
        assert.match(text, /argv/);
        text = await toolError(client, 'sandbox_resolve', { sandbox_id: 'bad id!', workspace_scope_id: 's' },
            'SANDBOX_INVALID_REQUEST');
        assert.match(text, /sandbox_id/);
        await toolError(client, 'sandbox_write_file', { sandbox_id: id, generation: 'one', path: 'a', content: '' },
            'SANDBOX_INVALID_REQUEST');
        await toolError(client, 'sandbox_write_file', { sandbox_id: id, generation: gen, path: 'a' },
            'SANDBOX_INVALID_REQUEST');
        await toolError(client, 'sandbox_status', { sandbox_id: id, timeout: 5 }, 'SANDBOX_INVALID_REQUEST');
        // An unknown tool is a protocol error: -32602.
        await assert.rejects(client.callTool({ name: 'sandbox_suspend', arguments: { sandbox_id: id } }),
            (e) => e instanceof McpError && e.code === -32602);
    });

    await check('sandbox_release', async () => {
        assert.deepEqual(await ok(client, 'sandbox_release', { sandbox_id: id, reason: 'test done' }),
            { sandbox_id: id, status: 'RELEASED' });
        assert.deepEqual(await ok(client, 'sandbox_release', { sandbox_id: id }), { sandbox_id: id, status: 'RELEASED' });
        assert.equal((await ok(client, 'sandbox_status', { sandbox_id: id })).status, 'RELEASED');
        await toolError(client, 'sandbox_read_file', { sandbox_id: id, generation: gen, path: 'runs.log' }, 'SANDBOX_NOT_FOUND');
        // A new lifecycle: a new generation and an empty workspace.
        const r = await ok(client, 'sandbox_resolve', { sandbox_id: id, workspace_scope_id: scope });
        assert.ok(r.generation > gen);
        await ok(client, 'sandbox_create', { sandbox_id: id, generation: r.generation });
        assert.deepEqual((await ok(client, 'sandbox_list_files', { sandbox_id: id, generation: r.generation })).entries, []);
        await ok(client, 'sandbox_release', { sandbox_id: id });
    });

    await check('close', async () => {
        await client.close();
        if (opt.transport === 'stdio') {
            await sleep(200);
            assert.ok(!stderr.includes(opt.token), 'the token never reaches stderr');
            assert.match(stderr, /bridging stdio to http/);
        }
    });

    console.log(JSON.stringify({ summary: { transport: results.transport, passed: results.passed.length,
        failed: results.failed.map((f) => f.name) } }));
    for (const f of results.failed) console.error(`--- ${f.name}\n${f.error}`);
    process.exit(results.failed.length ? 1 : 0);
}

main().catch((e) => {
    console.error(e && e.stack ? e.stack : e);
    process.exit(2);
});
