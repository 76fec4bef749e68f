"""Web page near-duplicate quality: main-content text signal vs the whole-page SimHash trap.

Five synthetic news sites, each with its own DOM structure and class names and 300-600
words of navigation, sidebar and footer (sidebar lists rotate per page, as real "most
read" boxes do): three English (semantic HTML5; a table layout; BEM div soup with a
comments section) and two Chinese. Article bodies: English prose from Python's own
reference text (`pydoc_data.topics`, cut into disjoint bodies of 200-400 words) and
Chinese text drawn from jieba's dictionary by word frequency. Every body appears as

    base   its home site's template
    cross  another site's template (same language)          -> duplicate of base
    date   home template, changed date line ("Updated ...")  -> duplicate of base
    ad     home template, changed in-article ad block        -> duplicate of base

and different bodies are never duplicates (same template or not). Methods, all on the
same pages:

    mmdedup       extract_page -> main text -> TextSigner(prior_model()).sign ->
                  similarity()["raw"] >= 0.45 (weak tier), 0.55 (medium), 0.65 (strong)
    + drop_repeated   the same after dropping blocks common on a site (BlockStats)
    baseline      lxml text_content() of the whole page -> plain 64-bit SimHash over
                  unweighted tokens, Hamming <= 3 (the template trap)
    main-text SimHash  the baseline's SimHash on mmdedup's main text (isolates extraction)

Pairs: all pairs of pages; positives are pairs within one body's family. Also DOM
similarity averages (same template / other template), and extraction speed (pages per
second, one run, one process): extract_page against trafilatura.extract alone.

    python scripts/bench/web_quality.py [--seed 1] [--en 120] [--zh 40]
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from html import escape
from pathlib import Path

import numpy as np
from lxml import html as lxml_html

from mmdedup.config import Settings
from mmdedup.extract import web
from mmdedup.extract.hashing import hash_tokens
from mmdedup.extract.minhash import jaccard
from mmdedup.extract.simhash import hamming, simhash64
from mmdedup.extract.term_weights import prior_model
from mmdedup.extract.text_sketches import TextSigner, similarity
from mmdedup.extract.tokens import tokenize_many

THRESHOLDS = (("weak", 0.45), ("medium", 0.55), ("strong", 0.65))
CASES = ("cross", "date", "ad")
SETTINGS = Settings()  # the limits and block thresholds as the ingest passes them

# --------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------


def en_bodies(n: int, rng: random.Random) -> list[tuple[str, list[str]]]:
    """(title, paragraphs) of n disjoint English bodies of 200-400 words."""
    from pydoc_data.topics import topics

    paras, seen = [], set()
    for key in sorted(topics):
        for p in re.split(r"\n\s*\n", topics[key]):
            if p.startswith("   ") and not re.match(r"\s+[A-Za-z\"*]", p):
                continue  # code examples
            text = " ".join(p.split())
            # Topics quote each other ("compound" holds "if", "while"...): each paragraph once,
            # so that different bodies really are different texts.
            if text in seen:
                continue
            seen.add(text)
            if len(text.split()) >= 15 and not re.search(r"::=|\*\*\*|>>>|^-+$", text):
                paras.append(text.replace("*", "").replace('"', "'"))
    bodies, current, words = [], [], 0
    target = rng.randint(200, 400)
    for p in paras:
        current.append(p)
        words += len(p.split())
        if words >= target:
            title = " ".join(current[0].split()[:9]).rstrip(",.;:")
            bodies.append((title[0].upper() + title[1:], current))
            current, words, target = [], 0, rng.randint(200, 400)
        if len(bodies) == n:
            break
    if len(bodies) < n:
        sys.exit(f"only {len(bodies)} English bodies available from pydoc_data")
    return bodies


def zh_bodies(n: int, rng: random.Random) -> list[tuple[str, list[str]]]:
    """(title, paragraphs) of n Chinese bodies of 400-700 characters, frequency-weighted
    words from jieba's dictionary (nouns, verbs, adjectives of common rank)."""
    import jieba

    path = Path(jieba.__file__).with_name("dict.txt")
    words, freqs = [], []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            w, f, tag = line.split()
            if tag[:1] in ("n", "v", "a") and 2 <= len(w) <= 4 and re.fullmatch(r"[\u4e00-\u9fff]+", w):
                words.append(w)
                freqs.append(int(f))
    order = np.argsort(freqs)[::-1][:12000]
    words = [words[i] for i in order]
    weights = np.asarray([freqs[i] for i in order], float) ** 0.5
    weights /= weights.sum()
    np_rng = np.random.default_rng(rng.randint(0, 2**31))
    bodies = []
    for _ in range(n):
        topic = list(np_rng.choice(words, size=30, p=weights, replace=False))  # what it is about
        paras = []
        for _ in range(rng.randint(4, 6)):
            sentences = []
            for _ in range(rng.randint(2, 4)):
                k = rng.randint(8, 16)
                toks = [rng.choice(topic) if rng.random() < 0.3 else str(w)
                        for w in np_rng.choice(words, size=k, p=weights)]
                cut = rng.randint(3, k - 3)
                sentences.append("".join(toks[:cut]) + "，" + "".join(toks[cut:]) + "。")
            paras.append("".join(sentences))
        bodies.append(("".join(topic[:3]) + "：" + "".join(topic[3:5]), paras))
    return bodies


# --------------------------------------------------------------------------------------
# Site templates
# --------------------------------------------------------------------------------------

_SUBJ = ["Council", "Ministers", "Police", "Hospital trust", "Rail operator", "Local school", "University",
         "Water company", "Football club", "Harbour board", "Museum", "Charity", "Farmers", "Residents",
         "Tech start-up", "Energy firm", "Bus company", "Theatre", "Court", "Airport"]
_VERB = ["approves", "rejects", "delays", "unveils", "warns over", "cuts", "expands", "reviews",
         "launches", "scraps", "defends", "celebrates", "investigates", "opens", "closes"]
_OBJ = ["new housing plan", "budget for next year", "winter timetable", "flood defences", "parking charges",
        "night bus service", "recycling scheme", "heritage trail", "youth centre", "summer festival",
        "cycle lanes", "plans for new stadium", "school meals contract", "waterfront hotel", "pay deal"]
_QUAL = ["after long debate", "despite protests", "amid funding row", "for the first time", "this weekend",
         "ahead of election", "after complaints", "in shake-up", "as costs rise", "following review"]
_ZH_HEAD = ["我市", "全省", "市民", "记者", "专家", "交通部门", "教育局", "文旅局", "气象台", "医院"]
_ZH_MID = ["发布", "启动", "推进", "完成", "开展", "调整", "公布", "部署", "迎来", "召开"]
_ZH_OBJ = ["夏季用电高峰保障方案", "老旧小区改造工程", "中小学招生政策", "夜间施工交通管制", "文明城市创建工作",
           "重点项目集中开工", "防汛应急演练", "公共文化服务", "农村道路提升工程", "人才引进计划",
           "惠民消费季活动", "垃圾分类宣传周", "城市绿道建设", "医保报销新规", "社区养老服务"]


def headlines(rng: random.Random, n: int, zh: bool = False) -> list[str]:
    if zh:
        return [rng.choice(_ZH_HEAD) + rng.choice(_ZH_MID) + rng.choice(_ZH_OBJ) for _ in range(n)]
    return [f"{rng.choice(_SUBJ)} {rng.choice(_VERB)} {rng.choice(_OBJ)} {rng.choice(_QUAL)}" for _ in range(n)]


EN_ADS = [
    "Advertisement. Switch to Bright Valley Energy today and save up to 200 pounds a year on your household bills. Terms and conditions apply.",
    "Sponsored. Book a weekend break on the coast from 59 pounds per night, breakfast included, with free cancellation until the day before arrival.",
    "Advertisement. The new Aurora hybrid hatchback: 60 miles per gallon, seven years warranty and zero percent finance on selected models this month.",
    "Promoted. Learn a new language in just ten minutes a day with the award-winning Lingo app. Start your free trial now.",
    "Advertisement. Home insurance from 8 pounds a month. Compare quotes from over forty insurers in under two minutes.",
    "Sponsored. Fresh recipe boxes delivered to your door every week. Get 60 percent off your first box with code FRESH60.",
]
ZH_ADS = ["广告：暑期特惠，海滨度假酒店双人套餐仅需六百九十九元，含早餐和景区门票，预订从速。",
          "推广：新款智能手机今日开售，以旧换新最高补贴一千元，分期免息，详询各大门店。",
          "广告：专业装修公司，十年质保，免费上门量房设计，本月签约再送家电大礼包。",
          "推广：在线英语课程，外教一对一，首课免费体验，扫码即可报名。"]


class Site:
    """A site: its template (one of three DOM styles), boilerplate, and per-page rotation."""

    def __init__(self, key: str, name: str, style: str, zh: bool, rng: random.Random, prefix: str = ""):
        self.key, self.name, self.style, self.zh, self.prefix = key, name, style, zh, prefix
        if zh:
            self.nav = ["首页", "本地要闻", "国内新闻", "国际新闻", "财经", "科技", "体育", "文化", "教育",
                        "健康", "房产", "汽车", "旅游", "视频", "图片", "专题"]
            self.footer_links = ["关于我们", "联系我们", "广告服务", "法律声明", "隐私政策", "网站地图",
                                 "招聘信息", "违法和不良信息举报"]
            self.legal = (f"版权所有 {name} 未经书面授权禁止转载、摘编、复制或建立镜像。"
                          "本网站所刊载信息不代表本网观点，如有侵权请与本网联系。互联网新闻信息服务许可证编号：12345678。"
                          f"{name}是经主管部门批准的综合性新闻网站，致力于为广大读者提供权威、及时、全面的本地新闻资讯，"
                          "服务热线：全天二十四小时在线，欢迎广大读者提供新闻线索。")
            self.pool = headlines(rng, 40, zh=True)
            self.blurb = "扫描二维码关注官方微信公众号，第一时间获取本地新闻、便民服务和优惠活动信息。"
        else:
            self.nav = ["Home", "News", "Local", "UK", "World", "Business", "Money", "Politics", "Sport",
                        "Football", "Culture", "Travel", "Property", "Motoring", "Opinion", "Weather",
                        "Puzzles", "Jobs"]
            self.footer_links = ["About us", "Contact us", "Advertise with us", "Privacy policy",
                                 "Cookie settings", "Terms of use", "Accessibility", "Careers", "Complaints",
                                 "Editorial code", "Subscriptions", "Archive", "Site map", "Help"]
            self.legal = (f"Copyright 2024 {name} Media Ltd. All rights reserved. Registered in England and Wales, "
                          "company number 04417718, registered office 1 Quay Street. This website and its content "
                          "may not be reproduced without permission. We are regulated by the Independent Press "
                          "Standards Organisation; if you have a complaint about our editorial content, please "
                          "read our complaints policy. Our journalism is funded by our readers and advertisers; "
                          "we may earn a commission from links to products in our articles.")
            self.pool = headlines(rng, 40)
            self.blurb = (f"Sign up to the {name} morning briefing: the day's top stories from the region, "
                          "handpicked by our editors and delivered to your inbox at 7am every weekday.")
        if zh:
            self.cookie = ("本网站使用Cookie以改善您的浏览体验、分析网站流量并提供个性化内容。继续浏览即表示您同意我们使用Cookie，"
                           "您可以随时在浏览器设置中更改。")
            self.about = (f"{name}创办于二〇〇一年，是本地区访问量最大的新闻门户之一，下设要闻、民生、财经、文旅、教育等二十多个频道，"
                          "日均发布原创稿件三百余篇，并通过客户端、微博、微信和短视频平台向读者提供全天候的新闻服务。")
            self.events = [f"{m}月{d}日 {x}" for m, d, x in zip(range(1, 13), range(3, 28, 2), [
                "城市马拉松报名开启", "春季花卉展开幕", "非遗文化周", "博物馆夜场开放", "美食节", "图书交易会",
                "音乐节", "科技馆新展", "龙舟赛", "灯会", "校园招聘会", "车展"])]
        else:
            self.cookie = ("We use cookies and similar technologies to improve your experience, measure audiences and show "
                           "personalised advertising. By continuing to browse you agree to our use of cookies. You can change "
                           "your choices at any time in Cookie settings.")
            self.about = (f"{name} has covered the region since 1887. Our newsroom of forty journalists reports on local "
                          "politics, business, courts, schools, sport and culture, and our award-winning investigations team "
                          "holds those in power to account. Got a story? Contact the newsdesk any time of day.")
            self.events = [f"{d} {m}: {x}" for d, m, x in zip(range(3, 30, 2), "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), [
                "Farmers market on the Quay", "Jazz in the park", "Lifeboat open day", "Classic car rally",
                "Food and drink festival", "Open air cinema", "Half marathon", "Book fair at the library",
                "Fireworks over the harbour", "Christmas lights switch-on", "Craft fair", "Choir concert"])]
        # A line inside the article container on every page (trafilatura keeps it):
        # what drop_repeated is for.
        self.appeal = {
            "semantic": "Independent local journalism needs your support. Subscribe today from 1 pound a week.",
            "table": f"Copyright {name}. Reproduction of this story without written permission is prohibited.",
            "bem": "Read more: the stories our readers loved this week, handpicked by our editors.",
        }[style] if not zh else {"table": f"（本文来源：{name}，转载请注明出处。）",
                                 "bem": "更多精彩内容，请下载客户端或关注官方微信公众号。"}[style]
        self.comments = [
            "Great article, thanks for covering this properly.", "This has been going on for years and nothing changes.",
            "Does anyone know when the consultation closes?", "Finally some good news for the town.",
            "I disagree with the council on this one, the cost is far too high.",
            "Well written and balanced, unlike some other coverage.", "My family has lived here for forty years and we support it.",
        ]

    def page(self, pid: str, title: str, paras: list[str], date_line: str, ad: str,
             rng: random.Random) -> str:
        side = rng.sample(self.pool, 14)  # rotating "most read" / "latest" boxes
        html = getattr(self, "_" + self.style)(pid, title, paras, date_line, ad, side, rng)
        # Every style also carries a cookie banner, an "about" box and a what's-on list
        # (rotating), placed where each style's sites put them.
        events = "".join(f"<li>{escape(x)}</li>" for x in rng.sample(self.events, 6))
        extra = {"semantic": (f'<div class="cookie-banner" role="dialog"><p>{escape(self.cookie)}</p></div>',
                              f'<section class="whats-on"><h3>What\'s on</h3><ul>{events}</ul></section>'
                              f'<div class="about-us"><p>{escape(self.about)}</p></div>'),
                 "table": (f'<div id="cookie"><table><tr><td>{escape(self.cookie)}</td></tr></table></div>',
                           f'<div class="box"><div class="box-title">Events</div><ul>{events}</ul></div>'
                           f'<div class="about">{escape(self.about)}</div>'),
                 "bem": (f'<div class="c-consent"><span class="c-consent__text">{escape(self.cookie)}</span></div>',
                         f'<div class="c-events"><ul class="c-events__list">{events}</ul></div>'
                         f'<div class="c-footer__about">{escape(self.about)}</div>')}[self.style]
        marker = {"semantic": "<footer", "table": '<div class="bottom">', "bem": '<div class="c-footer">'}[self.style]
        html = html.replace("<body", "<!--b--><body", 1)
        head, rest = html.split("<!--b-->", 1)
        body_open = rest.index(">") + 1
        rest = rest[:body_open] + extra[0] + rest[body_open:]
        html = head + rest.replace(marker, extra[1] + marker, 1)
        if self.prefix:  # the Chinese sites share DOM styles with English ones, not class names
            html = re.sub(r'(class|id)="([^"]*)"', lambda m: f'{m.group(1)}="'
                          + " ".join(self.prefix + c for c in m.group(2).split()) + '"', html)
        return html

    # -- semantic HTML5 ----------------------------------------------------------------
    def _semantic(self, pid, title, paras, date_line, ad, side, rng):
        e = escape
        body = [f"<p>{e(p)}</p>" for p in paras]
        body.insert(min(2, len(body)), f'<div class="ad-inline ad-{rng.randint(1, 99)}"><p>{e(ad)}</p></div>')
        nav = "".join(f'<li class="menu-item"><a href="/{i}">{e(x)}</a></li>' for i, x in enumerate(self.nav))
        most = "".join(f'<li><a href="/s/{i}">{e(h)}</a></li>' for i, h in enumerate(side[:8]))
        latest = "".join(f'<li><a href="/l/{i}">{e(h)}</a></li>' for i, h in enumerate(side[8:]))
        foot = "".join(f'<li><a href="/f/{i}">{e(x)}</a></li>' for i, x in enumerate(self.footer_links))
        return f"""<!DOCTYPE html><html lang="{'zh' if self.zh else 'en'}"><head><meta charset="utf-8">
<title>{e(title)} | {e(self.name)}</title><meta property="og:title" content="{e(title)}">
<script>window.dataLayer=window.dataLayer||[];</script></head>
<body class="article-page post-{pid}"><header class="site-header"><div class="brand"><a href="/">{e(self.name)}</a></div>
<nav class="main-nav"><ul class="menu">{nav}</ul></nav></header>
<div class="layout"><main class="content" id="main"><article class="post post-{pid}">
<h1 class="entry-title">{e(title)}</h1><p class="byline"><span class="date">{e(date_line)}</span></p>
<div class="entry-content">{''.join(body)}<p class="appeal">{e(self.appeal)}</p></div></article></main>
<aside class="sidebar"><section class="widget most-read"><h3>{'热点排行' if self.zh else 'Most read'}</h3><ol>{most}</ol></section>
<section class="widget latest"><h3>{'最新消息' if self.zh else 'Latest'}</h3><ul>{latest}</ul></section>
<section class="widget newsletter"><p>{e(self.blurb)}</p><form><input name="email"><button>OK</button></form></section></aside></div>
<footer class="site-footer"><ul class="footer-links">{foot}</ul><p class="copyright">{e(self.legal)}</p></footer>
</body></html>"""

    # -- table layout ------------------------------------------------------------------
    def _table(self, pid, title, paras, date_line, ad, side, rng):
        e = escape
        text = "<br><br>\n".join(e(p) for p in paras[:2]) + f'<div class="sponsor-inline">{e(ad)}</div>' + \
            "<br><br>\n".join(e(p) for p in paras[2:]) + f"<br><br>\n<i>{e(self.appeal)}</i>"
        menu = " ".join(f'<a class="mnu" href="/{i}">{e(x)}</a>' for i, x in enumerate(self.nav))
        trending = "<br>".join(f'<a href="/t/{i}">{e(h)}</a>' for i, h in enumerate(side[:7]))
        more = "<br>".join(f'<a href="/m/{i}">{e(h)}</a>' for i, h in enumerate(side[7:]))
        foot = " - ".join(f'<a href="/b/{i}">{e(x)}</a>' for i, x in enumerate(self.footer_links))
        return f"""<html><head><meta http-equiv="Content-Type" content="text/html; charset=utf-8">
<title>{e(self.name)} - {e(title)}</title></head><body><div id="wrapper">
<div class="topbar"><a href="/login">{'登录' if self.zh else 'Log in'}</a> | <a href="/register">{'注册' if self.zh else 'Register'}</a></div>
<div class="masthead"><span class="logo-text">{e(self.name)}</span></div><div class="menubar">{menu}</div>
<table class="cols" width="100%"><tr><td class="col-left" valign="top">
<div class="story" id="story-{pid}"><div class="headline">{e(title)}</div><div class="dateline">{e(date_line)}</div>
<div class="storytext">{text}</div><div class="sharebar">{'分享到：微信 微博' if self.zh else 'Share this story: Facebook X Email'}</div></div></td>
<td class="col-right" valign="top" width="300"><div class="box"><div class="box-title">{'热门' if self.zh else 'Trending'}</div>{trending}</div>
<div class="box"><div class="box-title">{'更多' if self.zh else 'More stories'}</div>{more}</div>
<div class="box"><div class="box-title">{'订阅' if self.zh else 'Newsletter'}</div>{e(self.blurb)}</div></td></tr></table>
<div class="bottom">{foot}<div class="small">{e(self.legal)}</div></div></div></body></html>"""

    # -- BEM div soup, with comments ----------------------------------------------------
    def _bem(self, pid, title, paras, date_line, ad, side, rng):
        e = escape
        body = [f'<p class="c-entry-content__p">{e(p)}</p>' for p in paras]
        body.insert(min(3, len(body)), f'<div class="c-ad c-ad--inline" id="ad-slot-{rng.randint(1, 999)}">{e(ad)}</div>')
        nav = "".join(f'<div class="c-nav-item"><span><a href="/{i}">{e(x)}</a></span></div>' for i, x in enumerate(self.nav))
        cards = "".join(f'<div class="c-card"><a href="/r/{i}"><h3 class="c-card__title">{e(h)}</h3></a></div>'
                        for i, h in enumerate(side[:6]))
        rail = "".join(f'<div class="c-rail__item"><a href="/x/{i}">{e(h)}</a></div>' for i, h in enumerate(side[6:]))
        comments = "".join(f'<div class="c-comment"><p class="c-comment__author">user{rng.randint(1, 9999)}</p>'
                           f'<p class="c-comment__body">{e(c)}</p></div>' for c in rng.sample(self.comments, 3))
        foot = "".join(f'<div class="c-footer__link"><a href="/z/{i}">{e(x)}</a></div>' for i, x in enumerate(self.footer_links))
        return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>{e(title)} - {e(self.name)}</title>
<meta name="twitter:title" content="{e(title)}"></head>
<body><div class="l-page"><div class="c-header"><div class="c-header__logo">{e(self.name)}</div>
<div class="c-header__nav">{nav}</div></div>
<div class="l-grid"><div class="l-grid__main"><div class="c-entry-hero"><h2 class="c-entry-hero__title">{e(title)}</h2>
<div class="c-byline"><span class="c-byline__item">{e(date_line)}</span></div></div>
<div class="c-entry-content">{''.join(body)}<p class="c-entry-content__more"><b>{e(self.appeal)}</b></p></div>
<div class="c-related"><h4>{'相关阅读' if self.zh else 'Related'}</h4>{cards}</div>
<div class="c-comments" id="comments"><h4>{'网友评论' if self.zh else 'Comments'}</h4>{comments}</div></div>
<div class="l-grid__side"><div class="c-rail">{rail}</div><div class="c-rail__promo">{e(self.blurb)}</div></div></div>
<div class="c-footer">{foot}<div class="c-footer__legal">{e(self.legal)}</div></div></div></body></html>"""


def date_lines(rng: random.Random, zh: bool) -> tuple[str, str]:
    day, month, hour = rng.randint(1, 28), rng.randint(1, 12), rng.randint(6, 20)
    if zh:
        return (f"2024-{month:02d}-{day:02d} {hour:02d}:00 来源：本网",
                f"2024-{month:02d}-{day + 1:02d} {hour + 2:02d}:15 更新 来源：本网")
    months = "January February March April May June July August September October November December".split()
    return (f"Published {day} {months[month - 1]} 2024, {hour}:00",
            f"Updated {day + 1} {months[month - 1]} 2024, {hour + 2}:15 - first published {day} {months[month - 1]}")


def build_corpus(seed: int, n_en: int, n_zh: int):
    """pages [(page id, html bytes, body id, case, site key)]"""
    rng = random.Random(seed)
    en_sites = [Site("harbor", "The Harbor Gazette", "semantic", False, rng),
                Site("northwind", "Northwind Daily", "table", False, rng),
                Site("voxel", "Voxel Review", "bem", False, rng)]
    zh_sites = [Site("binjiang", "滨江新闻网", "table", True, rng, prefix="bj-"),
                Site("xiyang", "夕阳日报", "bem", True, rng, prefix="xy-")]
    pages = []
    for lang, bodies, sites, ads in (("en", en_bodies(n_en, rng), en_sites, EN_ADS),
                                     ("zh", zh_bodies(n_zh, rng), zh_sites, ZH_ADS)):
        for i, (title, paras) in enumerate(bodies):
            body_id = f"{lang}{i}"
            home, other = sites[i % len(sites)], sites[(i + 1) % len(sites)]
            d1, d2 = date_lines(rng, lang == "zh")
            ad1, ad2 = rng.sample(ads, 2)
            variants = [("base", home, d1, ad1), ("cross", other, date_lines(rng, lang == "zh")[0], rng.choice(ads)),
                        ("date", home, d2, ad1), ("ad", home, d1, ad2)]
            for case, site, dl, ad in variants:
                pid = f"{body_id}-{case}"
                html = site.page(str(rng.randint(1000, 99999)), title, paras, dl, ad, rng)
                pages.append((pid, html.encode("utf-8"), body_id, case, site.key))
    return pages, en_sites + zh_sites


# --------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------


def count_words(text: str) -> float:
    """Latin words plus Chinese characters / 1.6 (about 1.6 characters a Chinese word)."""
    return len(re.findall(r"[A-Za-z0-9']+", text)) + len(re.findall(r"[\u4e00-\u9fff]", text)) / 1.6


def all_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.triu_indices(n, k=1)
    return i.astype(np.int64), j.astype(np.int64)


def text_scores(texts: list[str], i: np.ndarray, j: np.ndarray) -> np.ndarray:
    sk = TextSigner(prior_model()).sign(texts)
    out = np.empty(len(i))
    for lo in range(0, len(i), 50_000):
        out[lo:lo + 50_000] = similarity(sk.take(i[lo:lo + 50_000]), sk.take(j[lo:lo + 50_000]))["raw"]
    return out


def plain_simhash(texts: list[str]) -> np.ndarray:
    return simhash64(hash_tokens(tokenize_many(texts, drop_stop_words=False)))


def metrics(pred: np.ndarray, truth: np.ndarray, case_of_pair: np.ndarray) -> dict:
    tp = int((pred & truth).sum())
    fp = int((pred & ~truth).sum())
    out = {"precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / int(truth.sum()), "fp": fp}
    for case in CASES:
        sel = case_of_pair == case
        out[case] = float(pred[sel].mean())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--en", type=int, default=120, help="English bodies")
    ap.add_argument("--zh", type=int, default=40, help="Chinese bodies")
    args = ap.parse_args()

    pages, sites = build_corpus(args.seed, args.en, args.zh)
    n = len(pages)
    body = np.array([p[2] for p in pages])
    case = np.array([p[3] for p in pages])
    site = np.array([p[4] for p in pages])

    # Extraction (and speed).
    t0 = time.perf_counter()
    signals = [web.extract_page(p[1], max_bytes=SETTINGS.max_file_bytes, max_chars=SETTINGS.max_page_chars,
                                max_depth=SETTINGS.max_page_depth) for p in pages]
    t_ours = time.perf_counter() - t0
    import trafilatura

    t0 = time.perf_counter()
    for p in pages:
        trafilatura.extract(p[1])
    t_traf = time.perf_counter() - t0
    t0 = time.perf_counter()
    for p in pages:
        trafilatura.extract(p[1], with_metadata=True, favor_precision=True, include_comments=False)
    t_traf_meta = time.perf_counter() - t0

    main_texts = [s.text for s in signals]
    whole = [lxml_html.document_fromstring(p[1].decode("utf-8")).text_content() for p in pages]
    words = lambda texts: np.mean([count_words(t) for t in texts])
    stats = web.BlockStats()
    for s, sig in zip(site, signals):
        stats.add(str(s), web.block_hashes(sig.text))
    checker = lambda s: stats.checker(str(s), SETTINGS.block_min_pages, SETTINGS.block_min_share)  # noqa: E731
    dropped = [web.drop_repeated(sig.text, checker(s), SETTINGS.block_min_left) for s, sig in zip(site, signals)]

    i, j = all_pairs(n)
    truth = body[i] == body[j]
    # Recall per case: the variant against its base page.
    case_of_pair = np.where(truth & (case[i] == "base"), case[j], np.where(truth & (case[j] == "base"), case[i], ""))
    same_site = site[i] == site[j]

    rows = []
    raw = text_scores(main_texts, i, j)
    for name, thr in THRESHOLDS:
        rows.append((f"mmdedup main text, raw >= {thr} ({name})", metrics(raw >= thr, truth, case_of_pair),
                     int(((raw >= thr) & ~truth & same_site).sum())))
    raw_d = text_scores(dropped, i, j)
    for name, thr in THRESHOLDS[:1]:
        rows.append((f"mmdedup main text + drop_repeated, raw >= {thr} ({name})",
                     metrics(raw_d >= thr, truth, case_of_pair), int(((raw_d >= thr) & ~truth & same_site).sum())))
    raw_w = text_scores(whole, i, j)
    rows.append(("mmdedup signer on whole-page text (no extraction), raw >= 0.45",
                 metrics(raw_w >= 0.45, truth, case_of_pair), int(((raw_w >= 0.45) & ~truth & same_site).sum())))
    sh_whole = plain_simhash(whole)
    pred = hamming(sh_whole[i], sh_whole[j]) <= 3
    rows.append(("baseline: whole-page text, plain SimHash, Hamming <= 3", metrics(pred, truth, case_of_pair),
                 int((pred & ~truth & same_site).sum())))
    sh_main = plain_simhash(main_texts)
    pred = hamming(sh_main[i], sh_main[j]) <= 3
    rows.append(("plain SimHash on mmdedup main text, Hamming <= 3", metrics(pred, truth, case_of_pair),
                 int((pred & ~truth & same_site).sum())))

    _, mh = web.dom_sketch([s.tag_paths for s in signals])
    dom = np.empty(len(i))
    for lo in range(0, len(i), 50_000):
        dom[lo:lo + 50_000] = jaccard(mh[i[lo:lo + 50_000]], mh[j[lo:lo + 50_000]])

    n_en = int(np.char.startswith(body, "en").sum() // 4)
    print(f"## Web page near-duplicates (seed {args.seed})\n")
    print(f"{n} pages: {n_en} English and {n // 4 - n_en} Chinese bodies x (base, cross-template, changed date, "
          f"changed ad); {len(sites)} site templates; {len(i):,} pairs, {int(truth.sum()):,} duplicate pairs, "
          f"{int((~truth & same_site).sum()):,} different-body pairs under one template.")
    print(f"Mean words per page: whole page {words(whole):.0f}, main text {words(main_texts):.0f}, "
          f"after drop_repeated {words(dropped):.0f}; fallback used on "
          f"{sum(s.used_fallback for s in signals)} pages, empty main text on {sum(not t for t in main_texts)}.\n")
    tmpl_rng = random.Random(0)
    tmpl_words = ", ".join(
        f"{s.key} ({s.style}{', zh' if s.zh else ''}) {count_words(lxml_html.document_fromstring(s.page('0', 'x', [], 'x', 'x', tmpl_rng)).text_content()):.0f}"
        for s in sites)
    print(f"Template words (navigation, sidebar, footer; empty article): {tmpl_words}.\n")
    print("| method | precision | recall | false pairs (same template) | recall cross-template | recall date | recall ad |")
    print("|---|---|---|---|---|---|---|")
    for name, m, fp_same in rows:
        print(f"| {name} | {m['precision']:.1%} | {m['recall']:.1%} | {m['fp']:,} ({fp_same:,}) | "
              f"{m['cross']:.1%} | {m['date']:.1%} | {m['ad']:.1%} |")

    print("\n| raw text similarity | duplicates: min | duplicates: 1st pct | different bodies, same template: 99.9th pct | max |")
    print("|---|---|---|---|---|")
    for name, r in (("main text", raw), ("main text + drop_repeated", raw_d), ("whole-page text", raw_w)):
        d, o = r[truth], r[~truth & same_site]
        print(f"| {name} | {d.min():.3f} | {np.percentile(d, 1):.3f} | {np.percentile(o, 99.9):.3f} | {o.max():.3f} |")

    print("\n| DOM similarity (MinHash Jaccard of tag-path shingles) | pairs | mean | min | max |")
    print("|---|---|---|---|---|")
    groups = [("same template, different bodies", ~truth & same_site),
              ("different templates, different bodies", ~truth & ~same_site),
              ("same body, same template (date/ad variants)", truth & same_site),
              ("same body, different templates", truth & ~same_site)]
    for name, sel in groups:
        v = dom[sel]
        print(f"| {name} | {len(v):,} | {v.mean():.3f} | {v.min():.3f} | {v.max():.3f} |")

    print("\n| extraction, one process, same pages | seconds | pages/s |")
    print("|---|---|---|")
    for name, secs in (("web.extract_page (decode, parse, trafilatura, htmldate, title, tag paths)", t_ours),
                       ("trafilatura.extract(bytes), defaults", t_traf),
                       ("trafilatura.extract(bytes), with_metadata, favor_precision, no comments", t_traf_meta)):
        print(f"| {name} | {secs:.2f} | {n / secs:.0f} |")
    print(f"\nCommand: `python scripts/bench/web_quality.py --seed {args.seed} --en {args.en} --zh {args.zh}`")


if __name__ == "__main__":
    main()
