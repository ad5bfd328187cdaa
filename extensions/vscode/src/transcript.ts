// Renders a session's events as a readable transcript. No vscode import (tested from Node).
import { Event } from './protocol';

/** Keeps one session's events in seq order, ignoring replays of seqs it already has. */
export class EventBuffer {
  private readonly events: Event[] = [];
  private last = -1;

  add(e: Event): boolean {
    if (e.seq <= this.last) return false;
    this.events.push(e);
    this.last = e.seq;
    return true;
  }

  get lastSeq(): number {
    return this.last;
  }

  list(): readonly Event[] {
    return this.events;
  }
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v.length > 0 ? v : undefined;
}

function fenced(body: string, lang = ''): string {
  return '```' + lang + '\n' + body.replace(/\n$/, '') + '\n```';
}

/** Markdown for one event. Unknown types and fields fall back to their JSON. */
export function renderEvent(e: Event): string {
  const d = (e.data ?? {}) as Record<string, unknown>;
  const time = (e.ts ?? '').replace(/^.*T/, '').replace(/\.\d+/, '').replace('Z', '');
  const head = `### ${e.type} · #${e.seq}${time ? ' · ' + time : ''}`;
  const body: string[] = [];
  switch (e.type) {
    case 'session_created':
      body.push(`**Task:** ${str(d.task) ?? ''}`);
      for (const k of ['model', 'branch', 'baseCommit', 'parent']) if (str(d[k])) body.push(`- ${k}: \`${d[k]}\``);
      break;
    case 'state_changed':
      body.push(`→ **${str(d.state) ?? str(d.to) ?? JSON.stringify(d)}**` + (str(d.error) ? `: ${d.error}` : ''));
      break;
    case 'user_message':
    case 'assistant_message':
    case 'message_sent':
    case 'message_delivered':
    case 'message_queued': {
      if (str(d.text)) body.push(d.text as string);
      const calls = Array.isArray(d.toolCalls) ? d.toolCalls : Array.isArray(d.tool_calls) ? d.tool_calls : [];
      for (const c of calls as Array<Record<string, unknown>>) {
        const code = str(c.code) ?? str(c.Code) ?? str((c.arguments as Record<string, unknown> | undefined)?.code) ?? str(c.arguments);
        if (code) body.push(fenced(code, 'python'));
      }
      break;
    }
    case 'tool_started':
      // The code is in the assistant_message just before; say only that it runs.
      body.push(`running cell${str(d.callId) ? ' `' + d.callId + '`' : ''}…`);
      break;
    case 'tool_finished':
      if (str(d.output)) body.push(fenced(d.output as string));
      if (str(d.error)) body.push(`**error:** ${d.error}`);
      break;
    case 'turn_failed':
      body.push(`**failed:** ${str(d.error) ?? JSON.stringify(d)}`);
      break;
    case 'turn_started':
      body.push(`— turn ${d.turn ?? '?'} —`);
      break;
    case 'checkpoint':
      body.push(`checkpoint \`${String(d.commit ?? '').slice(0, 12)}\`${d.turn !== undefined ? ` after turn ${d.turn}` : ''}`);
      break;
    case 'interrupted':
      body.push(`**interrupted**${str(d.reason) ? ': ' + d.reason : ''}`);
      break;
    default:
      break;
  }
  if (body.length === 0 && Object.keys(d).length > 0) {
    const flat = Object.values(d).every(v => v === null || typeof v !== 'object');
    body.push(flat ? Object.entries(d).map(([k, v]) => `- ${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`).join('\n')
      : fenced(JSON.stringify(d, null, 2), 'json'));
  }
  return [head, ...body].join('\n\n');
}

export function renderTranscript(title: string, events: readonly Event[]): string {
  return [`# ${title}`, ...events.map(renderEvent)].join('\n\n') + '\n';
}
