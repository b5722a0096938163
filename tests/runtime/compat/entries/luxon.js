import { DateTime } from "luxon";

globalThis.middleware.userMessageInbound = async (c) => {
  const [when, zone] = c.text.split(" ");
  const there = DateTime.fromISO(when, { zone: "utc" }).setZone(zone);
  return `${there.toFormat("yyyy-MM-dd HH:mm ZZ")} ${there.offsetNameShort} ${there.plus({ months: 6 }).toFormat("HH:mm ZZ")}`;
};
