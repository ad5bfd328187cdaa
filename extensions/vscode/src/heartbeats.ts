// Heartbeats as the extension shows them: the schedule a user types ("every 10m", "10m" or a cron
// expression) read into heartbeat.create's fields, and a heartbeat's line in a list. No vscode
// import (tested from Node).
import * as P from './protocol';
import { parseDuration } from './goals';

/**
 * Reads a schedule: "every 10m" or a bare duration ("1h30m") is an interval; "cron …", five
 * fields or an @-name (@hourly) is a cron expression, which the daemon checks. Throws an Error
 * saying what to type instead.
 */
export function parseSchedule(text: string): Pick<P.HeartbeatCreateParams, 'every' | 'cron'> {
  const t = text.trim().replace(/\s+/g, ' ');
  const want = `schedule "${t}": want "every 10m" (an interval of at least 1s) or a cron expression such as "*/15 * * * *"`;
  const every = /^every (.+)$/i.exec(t)?.[1] ?? (parseDuration(t) !== undefined ? t : undefined);
  if (every !== undefined) {
    const ms = parseDuration(every);
    if (ms === undefined || ms < 1000) throw new Error(want);
    return { every };
  }
  const cron = /^cron (.+)$/i.exec(t)?.[1] ?? t;
  if (/^@\w+$/.test(cron) || cron.split(' ').length === 5) return { cron };
  throw new Error(want);
}

export function scheduleText(hb: P.Heartbeat): string {
  return hb.cron ? `cron ${hb.cron}` : `every ${hb.every ?? '?'}`;
}

/** "next due 18:30:05 · 2/3 runs delivered · 1 pending", or that the session stopped. */
export function heartbeatState(hb: P.Heartbeat): string {
  const next = hb.scheduled ? `next due ${(hb.nextDue ?? '').replace(/^.*T/, '').replace(/\.\d+/, '').replace(/Z|[+-]\d\d:\d\d$/, '')}` : 'not scheduled (session stopped)';
  return `${next} · ${hb.delivered}/${hb.ticks} runs delivered · ${hb.pending} pending`;
}
