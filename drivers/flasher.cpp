#include "drivers/flasher.h"

#include <cstdio>
#include <fstream>

#include "config/driver_specs.h"

namespace hwfarm::drivers {
namespace {

// Characters every command language here takes literally, even OpenOCD's
// `program`, which evaluates its file name a second time.
bool plainChar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' || c == '.' ||
         c == '_' || c == '-' || c == '+' || c == ',' || c == ':' || c == '=' || c == '@' || c == '%';
}

std::string byteText(unsigned char c) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", c);
  return c >= 0x20 && c < 0x7f ? "'" + std::string(1, static_cast<char>(c)) + "'" : std::string(text);
}

// Why `value` (`what` names it) holds a character that must never reach a
// tool, or empty.
std::string controlCharacter(const std::string& what, const std::string& value) {
  for (size_t i = 0; i < value.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c == 0x7f)
      return what + " contains the control character " + byteText(c) + " at byte " + std::to_string(i);
  }
  return {};
}

// The first character of `value` outside `allowed`, as a refusal, or empty.
template <class Allowed>
std::string onlyChars(const std::string& what, const std::string& value, const std::string& language,
                      Allowed allowed) {
  for (size_t i = 0; i < value.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    if (!allowed(c))
      return what + " contains " + byteText(c) + " at byte " + std::to_string(i) + ", which " + language +
             " cannot take safely";
  }
  return {};
}

// A value that would be read as an option (or, for esptool, an @argfile).
std::string optionLike(const std::string& what, const std::string& value, const std::string& leading) {
  if (!value.empty() && leading.find(value[0]) != std::string::npos)
    return what + " starts with '" + value.substr(0, 1) + "', which the tool would read as an option";
  return {};
}

} // namespace

Result<std::string> tclWord(const std::string& value) {
  if (std::string why = controlCharacter("value", value); !why.empty())
    return Status::infrastructure(Code::invalid_argument, why);
  if (value.empty()) return std::string("{}");
  std::string out;
  for (char c : value) {
    // Non-ASCII bytes are literal in Tcl; everything else not plain gets a
    // backslash, which makes it literal ("\}" is "}", "\[" is "[", "\ " is " ").
    if (!plainChar(static_cast<unsigned char>(c)) && static_cast<unsigned char>(c) < 0x80) out += '\\';
    out += c;
  }
  return out;
}

Result<std::vector<std::string>> flashArgv(const config::FlashConfig& c, const std::string& image,
                                           const FlashTarget& t, const std::string& scratch) {
  std::string why;
  auto refuse = [&](const std::string& message) {
    return Status::infrastructure(Code::invalid_argument, "flash driver \"" + c.driver + "\": " + message);
  };
  for (const auto& [what, value] : {std::pair<const char*, const std::string&>{"the image path", image},
                                    {"the USB serial", t.usb_serial},
                                    {"the serial port", t.serial_port}})
    if (!(why = controlCharacter(what, value)).empty()) return refuse(why);
  if (image.empty()) return refuse("no image path");

  auto opt = [&](const char* key) {
    auto it = c.options.find(key);
    return it == c.options.end() ? std::string() : it->second;
  };
  std::map<std::string, std::string> values{
      {"image", image}, {"usb_serial", t.usb_serial}, {"serial_port", t.serial_port}, {"board", t.board}};
  std::vector<std::string> argv;
  if (c.driver == "command") {
    // One argv element per template, no shell: values arrive verbatim.
    for (const auto& arg : c.argv) argv.push_back(config::expandTemplate(arg, values));
    return argv;
  }
  // Every preset takes the image and the serial as separate arguments.
  std::string leading = c.driver == "esptool" ? "-@" : "-";
  if (!(why = optionLike("the image path", image, leading)).empty()) return refuse(why);
  if (!(why = optionLike("the USB serial", t.usb_serial, leading)).empty()) return refuse(why);
  const config::FlashDriverSpec* spec = config::findFlashDriver(c.driver);
  argv.push_back(c.tool.value_or(spec ? spec->tool : c.driver));
  if (c.driver == "openocd") {
    argv.insert(argv.end(), {"-f", opt("interface")});
    if (!t.usb_serial.empty()) {
      // `adapter serial` is a C command: one Tcl evaluation.
      Result<std::string> serial = tclWord(t.usb_serial);
      if (!serial) return refuse("the USB serial: " + serial.status().message());
      argv.insert(argv.end(), {"-c", "adapter serial " + *serial});
    }
    if (!opt("adapter_speed_khz").empty()) argv.insert(argv.end(), {"-c", "adapter speed " + opt("adapter_speed_khz")});
    // `program` is a Tcl proc that evaluates its file name again (`eval flash
    // write_image ...`), so quoting cannot make every name safe: only plain
    // characters pass, and the braces keep the word whole at both levels.
    if (!(why = onlyChars("the image path", image, "OpenOCD's program command", plainChar)).empty())
      return refuse(why);
    argv.insert(argv.end(), {"-f", opt("target"), "-c", "program {" + image + "} verify reset exit"});
  } else if (c.driver == "pyocd") {
    argv.insert(argv.end(), {"flash", "--target", opt("target")});
    if (!t.usb_serial.empty()) argv.insert(argv.end(), {"--uid", t.usb_serial});
    if (!opt("frequency_hz").empty()) argv.insert(argv.end(), {"--frequency", opt("frequency_hz")});
    argv.push_back(image);
  } else if (c.driver == "dfu-util") {
    argv.insert(argv.end(), {"--alt", opt("alt")});
    if (!t.usb_serial.empty()) {
      // dfu-util reads "A,B" as the product's and the DFU interface's serials.
      if (t.usb_serial.find(',') != std::string::npos)
        return refuse("the USB serial contains ',', which dfu-util --serial reads as a separator");
      argv.insert(argv.end(), {"--serial", t.usb_serial});
    }
    argv.insert(argv.end(), {"--dfuse-address", opt("address") + ":leave", "--download", image});
  } else if (c.driver == "st-flash") {
    if (!t.usb_serial.empty()) argv.insert(argv.end(), {"--serial", t.usb_serial});
    argv.insert(argv.end(), {"--reset", "write", image, opt("address")});
  } else if (c.driver == "esptool") {
    // esptool finds the board by its serial port, which the USB match resolved.
    // pyserial opens "rfc2217://..." and other URLs: only a device path passes.
    if (!t.serial_port.empty() && t.serial_port[0] != '/')
      return refuse("the serial port \"" + t.serial_port + "\" is not an absolute device path");
    argv.insert(argv.end(), {"--chip", opt("chip"), "--port", t.serial_port, "--baud", opt("baud"), "write_flash",
                             opt("address"), image});
  } else if (c.driver == "jlink") {
    // J-Link Commander reads `loadfile <file> <addr>` words split at blanks
    // and commas, with "..." around a file name holding them; it has no
    // escape for '"'. Plain names go as they are, names with spaces quoted,
    // anything else is refused.
    auto jlinkChar = [](unsigned char ch) { return plainChar(ch) && ch != ',' && ch != '='; };
    if (!(why = onlyChars("the image path", image, "a J-Link command file",
                          [&](unsigned char ch) { return jlinkChar(ch) || ch == ' '; }))
             .empty())
      return refuse(why);
    std::string file = image.find(' ') == std::string::npos ? image : "\"" + image + "\"";
    std::string script = scratch + "/jlink-" + t.board + ".jlink";
    std::ofstream out(script, std::ios::trunc);
    out << "loadfile " << file << " " << opt("address") << "\nr\ng\nexit\n";
    out.close();
    if (!out) return refuse("cannot write the command file " + script);
    if (!t.usb_serial.empty()) argv.insert(argv.end(), {"-USB", t.usb_serial});
    argv.insert(argv.end(), {"-device", opt("device"), "-if", opt("interface"), "-speed", opt("speed_khz"),
                             "-autoconnect", "1", "-ExitOnError", "1", "-CommandFile", script});
  } else if (c.driver == "nrfjprog") {
    argv.insert(argv.end(), {"--family", opt("family")});
    if (!t.usb_serial.empty()) argv.insert(argv.end(), {"--snr", t.usb_serial});
    argv.insert(argv.end(), {"--program", image, "--sectorerase", "--verify", "--reset"});
  }
  // An openocd argument after "-c" is Tcl: its placeholders become Tcl words.
  std::map<std::string, std::string> tcl_values;
  if (c.driver == "openocd")
    for (const auto& [key, value] : values) {
      Result<std::string> word = tclWord(value);
      if (!word) return refuse("{" + key + "}: " + word.status().message());
      tcl_values[key] = std::move(word).value();
    }
  for (size_t i = 0; i < c.extra_args.size(); ++i) {
    bool tcl = c.driver == "openocd" && (i == 0 ? argv.back() == "-c" : c.extra_args[i - 1] == "-c");
    argv.push_back(config::expandTemplate(c.extra_args[i], tcl ? tcl_values : values));
  }
  return argv;
}

Status flash(const config::FlashConfig& config, const std::string& image, const FlashTarget& target,
             const std::string& log_path, const std::string& scratch) {
  ToolOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(config.timeout_s * 1000));
  options.log_path = log_path;
  options.what = "flasher of board " + target.board;
  Result<std::vector<std::string>> argv = flashArgv(config, image, target, scratch);
  if (!argv) return std::move(argv).takeStatus();
  return runTool(*argv, options).toStatus();
}

} // namespace hwfarm::drivers
