"""A twin EOS switch's environment: `show system environment cooling|temperature|power` and `show processes top once`
(eAPI JSON and CLI text; napalm reads top's text, ANTA its JSON).

Shapes are those napalm's `get_environment` and ANTA's hardware tests read from real switches: fan trays and
power-supply fans with status and speeds, temperature sensors with current, overheat and critical thresholds (on
the chassis and in each power supply), supplies with state, capacity and output power, and top's CPU and memory
lines. Values are stable per switch (derived from its name) and follow its traffic: a busier switch draws more
power and runs warmer. Every sensor is within its limits: the twin has no thermal faults (yet).
"""

from __future__ import annotations

import zlib
from typing import Any

from .counters import COL
from .model import Switch, Twin

Json = dict[str, Any]
FAN_TRAYS = 4
PSUS = 2
PSU_CAPACITY_W = 1900.0
# (name, description, idle °C, overheat, critical): a fixed-configuration 7060X/7388-class layout
SENSORS = (
    ("TempSensor1", "Cpu temp sensor", 38.0, 90.0, 100.0),
    ("TempSensor2", "Switch chip sensor", 52.0, 105.0, 115.0),
    ("TempSensor3", "Front-panel temp sensor", 27.0, 65.0, 75.0),
    ("TempSensor4", "Rear temp sensor", 31.0, 80.0, 90.0),
)


def _jitter(device: str, what: str, span: float) -> float:
    return (zlib.crc32(f"{device}|{what}".encode()) % 1000) / 1000 * span


def _load(sw: Switch) -> float:
    """The switch's mean port utilisation now (0..1), from the traffic model."""
    if not len(sw.speeds):
        return 0.0
    bits = float(sw.rate[:, COL["if.in-octets"]].sum()) * 8 if sw.rate.size else 0.0
    capacity = float(sw.speeds.sum()) * 1e9
    return min(1.0, bits / capacity) if capacity else 0.0


def _fan_speed(sw: Switch) -> int:
    return int(30 + 25 * _load(sw) + _jitter(sw.name, "fan", 4))


def cooling(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    speed = _fan_speed(sw)

    def fan(label: str) -> Json:
        return {"status": "ok", "uptime": now / 1e9 - _jitter(sw.name, label, 5000), "maxSpeed": 17500,
                "lastSpeedStableChangeTime": now / 1e9 - 600, "configuredSpeed": speed, "actualSpeed": speed - 1,
                "speedHwOverride": False, "speedStable": True, "label": label}  # fmt: skip

    return {
        "systemStatus": "coolingOk",
        "airflowDirection": "frontToBackAirflow",
        "overrideFanSpeed": 0,
        "minFanSpeed": 0,
        "shutdownOnInsufficientFans": True,
        "ambientTemperature": round(23.0 + _jitter(sw.name, "ambient", 3), 1),
        "fanTraySlots": [
            {"status": "ok", "speed": speed, "label": str(t), "fans": [fan(f"{t}/1")]} for t in range(1, FAN_TRAYS + 1)
        ],
        "powerSupplySlots": [
            {"status": "ok", "speed": speed, "label": f"PowerSupply{p}", "fans": [fan(f"PowerSupply{p}/1")]}
            for p in range(1, PSUS + 1)
        ],
    }


def _sensor(sw: Switch, name: str, description: str, idle: float, overheat: float, critical: float) -> Json:
    current = round(idle + 18 * _load(sw) + _jitter(sw.name, name, 2), 1)
    return {"name": name, "description": description, "relPos": name[-1], "currentTemperature": current,
            "maxTemperature": round(current + 3.5, 1), "overheatThreshold": overheat, "criticalThreshold": critical,
            "targetTemperature": overheat - 25, "hwStatus": "ok", "inAlertState": False, "alertCount": 0,
            "isPidDriver": False, "pidDriverCount": 0}  # fmt: skip


def temperature(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    return {
        "systemStatus": "temperatureOk",
        "shutdownOnOverheat": True,
        "tempSensors": [_sensor(sw, *s) for s in SENSORS],
        "cardSlots": [],
        "powerSupplySlots": [
            {
                "entPhysicalClass": "powerSupply",
                "relPos": str(p),
                "tempSensors": [_sensor(sw, f"TempSensorP{p}/1", "Power supply sensor", 30.0, 70.0, 80.0)],
            }
            for p in range(1, PSUS + 1)
        ],
    }


def power(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    total = 180.0 + 3.5 * len(sw.ports) * (0.4 + 0.6 * _load(sw))  # the ASIC and optics draw more under load
    out = {}
    for p in range(1, PSUS + 1):
        w = round(total / PSUS + _jitter(sw.name, f"psu{p}", 6), 1)
        out[str(p)] = {"state": "ok", "modelName": "PWR-1900AC-F", "capacity": PSU_CAPACITY_W, "outputPower": w,
                       "inputCurrent": round(w / 230 * 1.06, 2), "outputCurrent": round(w / 12, 2),
                       "uptime": now / 1e9 - sw.boot_ns / 1e9, "managed": True}  # fmt: skip
    return {"powerSupplies": out}


def processes_top(twin: Twin, sw: Switch, now: int, rows: list[int]) -> Json:
    """`show processes top once`: EOS answers it in JSON (what ANTA reads) and in text (what napalm parses)."""
    mem_total = 16_092_376
    used = int(mem_total * (0.38 + _jitter(sw.name, "mem", 0.05)))
    idle = round(93.5 - 4 * _load(sw), 1)
    user = round((100 - idle) * 0.8, 1)
    return {
        "timeInfo": {"time": "00:00:00", "upTime": f"{max(0, (now - sw.boot_ns) // 10**9)} s", "users": 0,
                     "loadAvg": [0.61, 0.55, 0.52]},
        "cpuInfo": {"%Cpu(s)": {"user": user, "system": round(100 - idle - user, 1), "nice": 0.0, "idle": idle,
                                "ioWait": 0.0, "hwIrq": 0.0, "swIrq": 0.0, "stolen": 0.0}},
        "memInfo": {"physicalMem": {"total": mem_total, "free": mem_total - used, "used": used,
                                    "buffCache": 2_634_412},
                    "swapMem": {"total": 0, "free": 0, "used": 0, "availMem": 9_113_816}},
        "processes": {"2291": {"userName": "root", "priority": "20", "niceValue": 0, "residentMem": "301116",
                               "sharedMem": "148864", "status": "S", "cpuPct": 6.2, "memPct": 1.9,
                               "cmd": "Sysdb"}},
    }  # fmt: skip


# --- CLI text -----------------------------------------------------------------------------------------------------
def cooling_text(data: Json, now: int) -> list[str]:
    lines = [
        "System cooling status is: Ok",
        f"Ambient temperature: {data['ambientTemperature']:.0f}C",
        "Airflow: port-side exhaust",
        "Config value: Automatic",
        "",
        "                                 Config Actual        Speed",
        "Fan            Status             Speed  Speed    Stability   Uptime",
        "-------------- ------------------ ------ ------ ------------ --------",
    ]
    for slot in data["fanTraySlots"] + data["powerSupplySlots"]:
        for fan in slot["fans"]:
            lines.append(f"{fan['label']:<14} Ok                 {fan['configuredSpeed']:>5}% {fan['actualSpeed']:>5}%"
                         "       Stable  running")  # fmt: skip
    return lines


def temperature_text(data: Json, now: int) -> list[str]:
    lines = [
        "System temperature status is: Ok",
        "",
        "                                                       Alert   Critical",
        "Sensor   Description                     Temperature  Limit   Limit     Status",
        "-------- ------------------------------- ----------- ------- --------- ------",
    ]
    sensors = list(data["tempSensors"])
    for slot in data["powerSupplySlots"]:
        sensors += slot["tempSensors"]
    for s in sensors:
        lines.append(f"{s['name']:<8} {s['description']:<31} {s['currentTemperature']:>9.1f}C"
                     f" {s['overheatThreshold']:>6.0f}C {s['criticalThreshold']:>8.0f}C ok")  # fmt: skip
    return lines


def power_text(data: Json, now: int) -> list[str]:
    lines = [
        "Power                       Input    Output  Output",
        "Supply  Model        Capacity Current Current  Power  Status",
        "------- ------------ -------- ------- ------- ------ ------",
    ]
    for name, p in data["powerSupplies"].items():
        lines.append(f"{name:<7} {p['modelName']:<12} {p['capacity']:>7.0f}W {p['inputCurrent']:>6.2f}A "
                     f"{p['outputCurrent']:>6.2f}A {p['outputPower']:>5.0f}W Ok")  # fmt: skip
    return lines


def processes_top_text(data: Json, now: int) -> list[str]:
    cpu = data["cpuInfo"]["%Cpu(s)"]
    mem = data["memInfo"]["physicalMem"]
    up = int(str(data["timeInfo"]["upTime"]).split()[0])
    days, rest = divmod(up, 86400)
    return [
        f"top - 00:00:00 up {days} days, {rest // 3600:2d}:{rest % 3600 // 60:02d},  0 users,  load average: 0.61, "
        "0.55, 0.52",
        "Tasks: 312 total,   1 running, 311 sleeping,   0 stopped,   0 zombie",
        f"%Cpu(s): {cpu['user']:4.1f} us, {cpu['system']:4.1f} sy,  0.0 ni, {cpu['idle']:4.1f} id,  0.0 wa,  0.0 hi,"
        "  0.0 si,  0.0 st",
        f"KiB Mem : {mem['total']:9d} total, {mem['free']:9d} free, {mem['used']:9d} used,  2634412 buff/cache",
        "KiB Swap:        0 total,        0 free,        0 used.  9113816 avail Mem",
        "",
        "  PID USER      PR  NI    VIRT    RES    SHR S  %CPU %MEM     TIME+ COMMAND",
        " 2291 root      20   0 1043712 301116 148864 S   6.2  1.9 212:44.25 Sysdb",
    ]
