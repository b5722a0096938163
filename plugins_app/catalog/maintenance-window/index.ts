// maintenance-window: cancels scheduled missions that would start inside the configured window.

interface WindowConfig {
  start: string;
  end: string;
  timeZone: string;
  days: string[];
  kinds: string[];
  // Computed by the hub from timeZone (compartments have no Intl): [fromEpochSeconds,
  // offsetSeconds] pairs, ascending, covering this year and the next ten.
  utcOffsets: [number, number][];
}

const DAY_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
const MINUTES_PER_DAY = 24 * 60;

function minutes(hhmm: string): number {
  const [h, m] = hhmm.split(":").map(Number);
  return h * 60 + m;
}

function offsetAt(epochSeconds: number, table: [number, number][]): number {
  let offset = table.length ? table[0][1] : 0;
  for (const [from, seconds] of table) {
    if (from > epochSeconds) break;
    offset = seconds;
  }
  return offset;
}

// Whether local wall-clock time `minute` on weekday `day` (0 = Sunday) is inside the window.
function insideWindow(config: WindowConfig, minute: number, day: number): boolean {
  const start = minutes(config.start);
  const end = minutes(config.end);
  const opensOn = (d: number) => config.days.length === 0 || config.days.includes(DAY_NAMES[(d + 7) % 7]);
  if (start === end) return opensOn(day);
  if (start < end) return minute >= start && minute < end && opensOn(day);
  // Past midnight: the evening part opened today, the morning part opened yesterday.
  return (minute >= start && opensOn(day)) || (minute < end && opensOn(day - 1));
}

function describe(config: WindowConfig): string {
  const days = config.days.length ? ` on ${config.days.join(", ")}` : "";
  return `maintenance window ${config.start}\u2013${config.end} ${config.timeZone}${days}`;
}

globalThis.middleware.cronJobFiring = async (context, tools) => {
  const config = host.config as WindowConfig;
  if (!config.kinds.includes(context.kind)) return context.prompt;
  const nowMs = Date.now();
  const local = new Date(nowMs + offsetAt(Math.floor(nowMs / 1000), config.utcOffsets) * 1000);
  const minute = local.getUTCHours() * 60 + local.getUTCMinutes();
  if (!insideWindow(config, minute % MINUTES_PER_DAY, local.getUTCDay())) return context.prompt;
  return tools.cancel(`held: ${describe(config)}`);
};
