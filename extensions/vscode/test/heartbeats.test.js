// Heartbeats in the extension (out/heartbeats.js): the schedule a user types, and a heartbeat's
// line in the list.
'use strict';
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { parseSchedule, scheduleText, heartbeatState } = require('../out/heartbeats');

test('parseSchedule reads an interval or a cron expression', () => {
  assert.deepEqual(parseSchedule('every 10m'), { every: '10m' });
  assert.deepEqual(parseSchedule('  Every  1h30m '), { every: '1h30m' });
  assert.deepEqual(parseSchedule('90s'), { every: '90s' });
  assert.deepEqual(parseSchedule('*/15 * * * *'), { cron: '*/15 * * * *' });
  assert.deepEqual(parseSchedule('cron 0 3 * * 1-5'), { cron: '0 3 * * 1-5' });
  assert.deepEqual(parseSchedule('@hourly'), { cron: '@hourly' });
  for (const bad of ['every 10q', 'every 500ms', 'soon', '* * *', '']) {
    assert.throws(() => parseSchedule(bad), { message: `schedule "${bad.trim()}": want "every 10m" (an interval of at least 1s) or a cron expression such as "*/15 * * * *"` }, bad);
  }
});

test('a heartbeat\'s line says its schedule, next due time, runs and pending count', () => {
  const hb = { id: 'hb12ab', session: 's', instruction: 'check CI', every: '10m', created: '2026-01-01T10:00:00Z', nextDue: '2026-01-01T10:30:05.123Z',
    ticks: 3, delivered: 2, pending: 1, scheduled: true };
  assert.equal(scheduleText(hb), 'every 10m');
  assert.equal(scheduleText({ ...hb, every: undefined, cron: '0 3 * * *' }), 'cron 0 3 * * *');
  assert.equal(heartbeatState(hb), 'next due 10:30:05 · 2/3 runs delivered · 1 pending');
  assert.equal(heartbeatState({ ...hb, scheduled: false }), 'not scheduled (session stopped) · 2/3 runs delivered · 1 pending');
});
