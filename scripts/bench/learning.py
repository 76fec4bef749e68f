"""The review loop's benchmark: does labelling a few pairs fix the classic mistakes?

A corpus of government notices (Chinese) and council notices (English), generated from a
fixed seed:

- decisive pairs: one notice in two versions that differ only in the decision
  ("给予批准" / "不予批准", "准予" / "不予", "approved" / "rejected", "shall" / "shall not");
  they are distinct, but every sketch sees the same words and calls them duplicates;
- reposts: one notice re-published by another outlet with a new date line, source line
  and editor's name (the editors and outlets of a newsroom, a pool of each); they are
  duplicates that the changed lines push down the tiers;
- held-out true duplicates (punctuation width, a sentence dropped, whitespace) and
  unrelated notices on the same topics.

Reviewers label TRAIN decisive pairs distinct and TRAIN reposts duplicate (through the
API, as `mmdedup label` would); `retrain` runs; then the UNSEEN pairs (other notices, the
same decisive words, other dates and editors) are scored before and after. Reported: the
tier of each unseen pair before and after, and the recall of held-out true duplicates.

    python scripts/bench/learning.py [--train 12] [--test 40] [--seed 1]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections import Counter

from mmdedup import Platform

ORGS = ["市发展和改革委员会", "市生态环境局", "市住房和城乡建设局", "市交通运输局", "市市场监督管理局",
        "市自然资源和规划局", "市水务局", "市文化广电旅游局", "市卫生健康委员会", "市教育局"]
NAMES = ["华兴", "东方", "青山", "远航", "金桥", "绿源", "新世纪", "长河", "星光", "恒通", "蓝天", "和平",
         "宏达", "瑞丰", "博远", "海纳", "天润", "鑫源", "嘉禾", "聚力", "万通", "同创", "安康", "德信"]
KINDS = ["建材有限公司", "物流股份有限公司", "食品有限公司", "船舶修造厂", "房地产开发有限公司",
         "环保科技有限公司", "医药有限公司", "水电站", "文化传媒有限公司", "汽车销售服务有限公司"]
PROJECTS = ["年产十万吨水泥粉磨站扩建项目", "城东物流园区仓储设施建设", "食品生产许可延续",
            "码头岸线使用", "旧城改造安置房建设", "危险废物经营许可", "药品经营许可证换发",
            "小水电站增效扩容改造", "户外广告设施设置", "机动车维修经营备案", "民办幼儿园办学许可",
            "医疗机构执业登记变更", "临时占用城市道路", "取水许可", "建设用地规划许可", "排污许可证核发"]
SENTENCES = [
    "经审查，申请材料齐全，符合法定形式。", "项目选址位于{place}，总投资约{money}万元。",
    "你单位应严格落实安全生产主体责任，加强日常管理。", "请你单位自收到本批复之日起{days}日内办理相关手续。",
    "项目建设应符合国土空间规划和生态环境保护要求。", "如对本决定不服，可在六十日内申请行政复议。",
    "现场核查时发现{problem}。", "申请事项涉及{place}周边{n}户居民，已完成公示。",
    "请按照有关规定做好信息公开工作。", "该项目已列入{year}年度重点建设项目计划。",
    "项目用地面积{area}平方米，建筑面积{area2}平方米。", "专家评审会于{m}月{d}日召开，{k}名专家参加评审。",
    "你单位须在{place}设置公告牌，公示许可内容。", "有效期自批复之日起{y}年。",
    "请{org2}按职责做好事中事后监管。", "项目投产后预计新增就业岗位{n}个。",
    "申请单位承诺对所提交材料的真实性负责。", "设施运行应符合{std}的要求。",
]
PLACES = ["城东新区", "河西工业园", "南山街道", "北湖片区", "高铁新城", "老城区", "江北开发区", "西郊镇",
          "滨江路", "五里铺", "金沙湾", "红旗村"]
PROBLEMS = ["消防通道被占用", "环评手续不完整", "部分设备未经检验", "排污口设置不规范", "用地手续尚未办结",
            "安全距离不足", "台账记录缺失"]
STANDARDS = ["国家相关标准", "《大气污染物综合排放标准》", "《建筑设计防火规范》", "行业技术规范"]
DECISIONS_ZH = [("给予批准", "不予批准"), ("准予许可", "不予许可"), ("同意备案", "不同意备案")]
OUTLETS = ["市政府网站", "新华网", "人民网", "本地日报", "晚报", "市电视台", "政务微博", "今日头条"]
EDITORS = ["张伟", "王芳", "李娜", "刘洋", "陈静", "杨帆", "赵磊", "黄敏"]
EN_TOWNS = ["Ashford", "Brackley", "Colwick", "Dunmore", "Eastleigh", "Fenwick", "Greyhope", "Harlow",
            "Ilkley", "Jarrow", "Kesgrave", "Lydney"]
EN_APPS = ["a two-storey rear extension", "the change of use of a shop to a cafe",
           "a new vehicle access onto the high street", "the felling of three protected oaks",
           "a licence for outdoor seating", "the conversion of a barn to two dwellings",
           "a telecommunications mast of 15 metres", "a late-night alcohol licence",
           "a solar farm on agricultural land", "the demolition of a listed outbuilding",
           "a house in multiple occupation", "an illuminated advertising hoarding",
           "a skate park on the recreation ground", "a drive-through restaurant"]
EN_STREETS = ["Mill Lane", "Church Street", "Station Road", "Kings Avenue", "Bridge End", "Orchard Way"]
EN_SENTENCES = [
    "The planning committee considered the application at its meeting on {day}.",
    "Objections were received from {n} neighbouring residents.",
    "The site lies within the {town} conservation area.",
    "The applicant must comply with all conditions listed in the schedule.",
    "An appeal may be lodged with the planning inspectorate within six months.",
    "The highways authority raised no objection subject to conditions.",
    "Works must begin within three years of the date of this notice.",
    "A flood risk assessment by {firm} was submitted with the application.",
    "The parish council of {town} supported the proposal by {k} votes to {k2}.",
    "Noise from the site must not exceed {db} decibels at the nearest dwelling.",
    "Opening hours are limited to {h1} am until {h2} pm on weekdays.",
    "The ecology survey found {species} roosting in the roof space.",
    "A contribution of {money} pounds towards local schools is required.",
    "The case officer, {officer}, visited the site on {day}.",
    "Parking for {n} cars and {k} bicycles must be provided before first use.",
]
EN_FIRMS = ["Hydro Consult", "Brook and Partners", "Aqua Survey Ltd", "Meridian Engineering"]
EN_SPECIES = ["pipistrelle bats", "barn owls", "house martins", "great crested newts"]
EN_OFFICERS = ["Ms Carter", "Mr Dowd", "Dr Ellison", "Mrs Fairbairn", "Mr Gupta"]
DECISIONS_EN = [("approved", "rejected"), ("shall be granted", "shall not be granted")]
EN_EDITORS = ["J. Smith", "A. Patel", "M. Brown", "L. Green", "R. Khan", "S. Evans"]
EN_OUTLETS = ["Council website", "Gazette", "Evening Post", "Borough News", "Local Radio"]


def zh_notice(rng: random.Random, decision: str) -> str:
    """A Chinese approval notice with this decision phrase."""
    org, project = rng.choice(ORGS), rng.choice(PROJECTS)
    company = rng.choice(NAMES) + rng.choice(KINDS)
    fill = {"place": rng.choice(PLACES), "money": rng.randrange(200, 9000) * 10,
            "problem": rng.choice(PROBLEMS), "n": rng.randrange(20, 400), "days": rng.choice([15, 30, 60]),
            "year": rng.randrange(2019, 2026), "area": rng.randrange(1000, 90000),
            "area2": rng.randrange(1000, 90000), "m": rng.randrange(1, 13), "d": rng.randrange(1, 29),
            "k": rng.randrange(3, 9), "y": rng.randrange(1, 6), "org2": rng.choice(ORGS),
            "std": rng.choice(STANDARDS)}
    picked = [s.format(**fill) for s in rng.sample(SENTENCES, 5)]
    return (f"{org}关于{company}{project}的批复\n{company}：\n你单位报送的《关于{project}的申请》收悉。"
            f"{picked[0]}{picked[1]}经研究，{decision}你单位{project}。{picked[2]}{picked[3]}{picked[4]}\n{org}")


def en_notice(rng: random.Random, decision: str) -> str:
    town, app = rng.choice(EN_TOWNS), rng.choice(EN_APPS)
    fill = {"town": town, "n": rng.randrange(2, 60), "day": f"{rng.randrange(1, 28)} March",
            "firm": rng.choice(EN_FIRMS), "k": rng.randrange(2, 9), "k2": rng.randrange(0, 4),
            "db": rng.randrange(35, 60), "h1": rng.randrange(6, 10), "h2": rng.randrange(5, 11),
            "species": rng.choice(EN_SPECIES), "money": rng.randrange(5, 300) * 1000,
            "officer": rng.choice(EN_OFFICERS)}
    picked = [s.format(**fill) for s in rng.sample(EN_SENTENCES, 4)]
    return (f"{town} Borough Council. Notice of decision on the application for {app} at "
            f"{rng.randrange(1, 200)} {rng.choice(EN_STREETS)}. "
            f"{picked[0]} {picked[1]} The application is {decision}. {picked[2]} {picked[3]}")


def short_notice(rng: random.Random, decision: str, zh: bool) -> str:
    """A brief notice (a decision and one more sentence): what gets re-posted most."""
    text = (zh_notice if zh else en_notice)(rng, decision)
    if zh:
        head, _, rest = text.partition("经研究，")
        title = head.split("\n")[0]
        return f"{title}\n经研究，" + "。".join(rest.split("。")[:2]) + "。"
    sentences = text.split(". ")
    return ". ".join(sentences[:1] + [s for s in sentences if decision in s] + sentences[-1:])


def repost(rng: random.Random, body: str, zh: bool) -> str:
    """The notice as an outlet re-publishes it: a date and source line above, an editor's
    line below (another outlet: another date, source and editor)."""
    y, m, d = rng.randrange(2019, 2026), rng.randrange(1, 13), rng.randrange(1, 29)
    views = rng.randrange(100, 9999)
    if zh:
        return (f"发布时间：{y}年{m}月{d}日 来源：{rng.choice(OUTLETS)} 浏览次数：{views}\n{body}\n"
                f"（责任编辑：{rng.choice(EDITORS)} 审核：{rng.choice(EDITORS)}）")
    return (f"Published {d}/{m}/{y} by {rng.choice(EN_OUTLETS)}, {views} views.\n{body}\n"
            f"Edited by {rng.choice(EN_EDITORS)}, checked by {rng.choice(EN_EDITORS)}.")


def held_out_variant(rng: random.Random, text: str) -> str:
    kind = rng.randrange(3)
    if kind == 0:  # punctuation width
        return text.replace("，", ",").replace("。", ".").replace("：", ":")
    if kind == 1:  # a sentence dropped (not the one with the decision)
        parts = text.split("。")
        spare = [i for i in range(1, len(parts) - 1) if "经研究" not in parts[i]]
        if spare:
            del parts[rng.choice(spare)]
        return "。".join(parts)
    return text.replace("\n", "\n\n ")


def build(seed: int, n_train: int, n_test: int) -> dict[str, list]:
    rng = random.Random(seed)
    items: list[dict] = []
    groups: dict[str, list[tuple[str, str]]] = {k: [] for k in (
        "decisive_train", "decisive_test", "repost_train", "repost_test", "held_out")}

    def add(text: str) -> str:
        items.append({"id": f"n{len(items)}", "text": text})
        return items[-1]["id"]

    for split, n in (("train", n_train), ("test", n_test)):
        for i in range(n):
            zh = i % 3 != 2  # every decisive phrase in turn, in both splits
            yes, no = DECISIONS_ZH[(i // 3 * 2 + i % 3) % 3] if zh else DECISIONS_EN[(i // 3) % 2]
            make = zh_notice if zh else en_notice
            seed_i = rng.random()
            a = make(random.Random(seed_i), yes)
            b = make(random.Random(seed_i), no)
            groups[f"decisive_{split}"].append((add(a), add(b)))
            body = short_notice(rng, rng.choice([yes, no]), zh)
            groups[f"repost_{split}"].append((add(repost(rng, body, zh)), add(repost(rng, body, zh))))
    for i in range(n_test):
        zh = i % 3 != 2
        body = (zh_notice if zh else en_notice)(rng, rng.choice(["给予批准", "approved"]))
        groups["held_out"].append((add(body), add(held_out_variant(rng, body))))
    for i in range(n_test):  # unrelated notices on the same topics
        add((zh_notice if i % 3 != 2 else en_notice)(rng, rng.choice(["给予批准", "approved"])))
    return {"items": items, **groups}


def tiers_of(platform: Platform, pairs: list[tuple[str, str]]) -> list[str]:
    found = {frozenset((p["a"], p["b"])): p["tier"] for p in platform.pairs()}
    return [found.get(frozenset(p), "none") for p in pairs]


def unrelated(platform: Platform, data: dict[str, list]) -> dict[str, int]:
    """Tiers of pairs that are none of the generated pairs (different notices)."""
    known = {frozenset(p) for k, v in data.items() if k != "items" for p in v}
    return dict(Counter(p["tier"] for p in platform.pairs() if frozenset((p["a"], p["b"])) not in known))


def share(tiers: list[str], allowed: set[str]) -> float:
    return sum(t in allowed for t in tiers) / len(tiers)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=int, default=12)
    ap.add_argument("--test", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--db", default=None)
    ap.add_argument("--show", action="store_true", help="print unseen decisive pairs still >= medium")
    args = ap.parse_args()
    data = build(args.seed, args.train, args.test)
    with tempfile.TemporaryDirectory() as home, Platform.open(home, args.db) as p:
        p.ingest(data["items"])
        before = {k: tiers_of(p, data[k]) for k in data if k != "items"}
        unrelated_before = unrelated(p, data)
        for a, b in data["decisive_train"]:
            p.label(a, b, duplicate=False, reviewer="bench")
        for a, b in data["repost_train"]:
            p.label(a, b, duplicate=True, reviewer="bench")
        start = time.perf_counter()
        report = p.retrain()
        took = time.perf_counter() - start
        after = {k: tiers_of(p, data[k]) for k in data if k != "items"}
        unrelated_after = unrelated(p, data)
        again = p.retrain()
    print(report.summary())
    print(f"(retrain took {took:.1f} s; a second run: "
          f"{'nothing changed' if not again.changed else 'CHANGED'})")
    print()
    print(f"| set ({args.train} train pairs of each kind labelled, {args.test} unseen) | "
          "before retrain | after retrain |")
    print("|---|---|---|")
    for key, label, allowed in (
            ("decisive_test", "unseen decisive-word pairs below medium", {"weak", "none"}),
            ("repost_test", "unseen reposts in strong", {"strong"}),
            ("held_out", "held-out true duplicates found (>= weak)", {"strong", "medium", "weak"}),
            ("held_out", "held-out true duplicates in strong", {"strong"}),
            ("decisive_train", "train decisive pairs below medium", {"weak", "none"}),
            ("repost_train", "train reposts in strong", {"strong"})):
        print(f"| {label} | {share(before[key], allowed):.1%} | {share(after[key], allowed):.1%} |")
    print()
    for key in ("decisive_test", "repost_test", "held_out"):
        print(f"{key}: before {dict(Counter(before[key]))} after {dict(Counter(after[key]))}")
    print(f"pairs of unrelated notices (no pair above is one): before {unrelated_before}, after "
          f"{unrelated_after}")
    if args.show:
        texts = {i["id"]: i["text"] for i in data["items"]}
        for (a, b), tier in zip(data["decisive_test"], after["decisive_test"]):
            if tier in ("strong", "medium"):
                print(f"--- still {tier}:\n{texts[a]}\n{texts[b]}")


if __name__ == "__main__":
    main()
