import dayjs from "dayjs";
import timezone from "dayjs/plugin/timezone";
import utc from "dayjs/plugin/utc";

dayjs.extend(utc);
dayjs.extend(timezone);
globalThis.middleware.userMessageInbound = async (c) => {
  const [when, zone] = c.text.split(" ");
  return dayjs.utc(when).tz(zone).format("YYYY-MM-DD HH:mm Z");
};
