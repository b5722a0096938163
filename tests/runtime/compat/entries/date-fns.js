import { addBusinessDays, differenceInCalendarDays, format, parseISO } from "date-fns";
globalThis.middleware.userMessageInbound = async (c) => {
  const [from, to] = c.text.split(" ");
  const start = parseISO(from);
  return [format(start, "EEEE, MMMM do yyyy"), differenceInCalendarDays(parseISO(to), start),
    format(addBusinessDays(start, 3), "yyyy-MM-dd")].join(" | ");
};
